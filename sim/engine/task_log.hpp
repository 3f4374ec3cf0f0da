// A record of every finished task and collective, by id, for tests and small inspections. The
// engine retires what has finished; this keeps it, so its memory grows with the run (the results
// recorders of report/ keep only what they need).
#pragma once

#include <vector>

#include "sim/engine/engine.hpp"

namespace moesim::engine {

class TaskLog final : public TaskObserver {
 public:
  struct Span {
    Time start = -1, end = -1;
  };
  explicit TaskLog(Engine& engine) { engine.add_observer(this); }

  void on_finish(const Engine&, TaskId id, const Task& task, Time began) override {
    if (tasks_.size() <= id) tasks_.resize(static_cast<std::size_t>(id) + 1);
    tasks_[id] = task;
    if (task.collective == kNone) return;
    if (collectives_.size() <= task.collective) collectives_.resize(static_cast<std::size_t>(task.collective) + 1);
    collectives_[task.collective] = {began, task.end};
  }
  // Indexed by id; a task not finished (yet) has end −1.
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<Span>& collectives() const { return collectives_; }

 private:
  std::vector<Task> tasks_;
  std::vector<Span> collectives_;
};

}  // namespace moesim::engine
