// run_sweep over several ranks, the ranks threads of this process talking through in-memory
// mailboxes (the protocol that `mpirun -np N moesim sweep` speaks over MPI, tests/mpi has that):
// the CSV rank 0 writes is the single process's byte for byte, whatever the ranks and threads;
// a sweep stopped early under ranks resumes under others; a failure on rank 0 alone before any
// point runs stops every rank, rank 0 saying why and the others quiet with its exit code.
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <fstream>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "sim/core/error.hpp"
#include "sim/sweep/ranks.hpp"
#include "sim/sweep/runner.hpp"
#include "test_support.hpp"

using namespace moesim;
using schema::Json;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

// n ranks in one process.
class World {
 public:
  explicit World(int n) : size_(n), boxes_(static_cast<std::size_t>(n)) {}

  class Rank final : public sweep::Ranks {
   public:
    Rank(World& world, int rank) : world_(world), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return world_.size_; }
    int local_size() const override { return world_.size_; }
    std::vector<int> all_codes(int code) override { return world_.all_codes(rank_, code); }
    void send(int to, const std::string& message) override {
      std::lock_guard lock(world_.mu_);
      world_.boxes_.at(static_cast<std::size_t>(to)).emplace_back(rank_, message);
      world_.cv_.notify_all();
    }
    std::pair<int, std::string> receive(int from) override {
      std::unique_lock lock(world_.mu_);
      auto& box = world_.boxes_[static_cast<std::size_t>(rank_)];
      for (;;) {
        for (auto it = box.begin(); it != box.end(); ++it)
          if (from == kAnyRank || it->first == from) {
            auto message = std::move(*it);
            box.erase(it);
            return message;
          }
        world_.cv_.wait(lock);
      }
    }
    [[noreturn]] void abort(int) override { std::abort(); }

   private:
    World& world_;
    int rank_;
  };

 private:
  std::vector<int> all_codes(int rank, int code) {
    std::unique_lock lock(mu_);
    const int round = rounds_[rank]++;
    auto& codes = codes_[round];
    codes.resize(static_cast<std::size_t>(size_));
    codes[static_cast<std::size_t>(rank)] = code;
    ++arrived_[round];
    cv_.notify_all();
    cv_.wait(lock, [&] { return arrived_[round] == size_; });
    return codes;
  }

  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<std::pair<int, std::string>>> boxes_;
  std::map<int, int> rounds_, arrived_;
  std::map<int, std::vector<int>> codes_;
};

struct RankResult {
  sweep::SweepOutcome outcome;
  int code = 0;  // 0, or the exit code the rank stops with
  std::string error;
};

class SweepRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moesim-sweep-ranks-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    // Parm's Table III grid cut to 3 x 3 x 4 = 36 points (mp size, micro-batch, schedule), the
    // other axes at their first value.
    Json doc = Json::parse(test::repository_file("scenarios/parm-table3-a.json"));
    for (auto& axis : doc["sweep"]["axes"]) {
      const std::string path = axis.value("path", "");  // "" on the zipped axis (esp, experts, hidden, ffn)
      if (path != "strategy.mp_size" && path != "training.micro_batch_size" && path != "strategy.schedule")
        axis["values"] = Json::array({axis["values"][0]});
    }
    resolved_ = loader_.resolve(doc, "parm.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  sweep::SweepOptions options(const std::string& out, unsigned jobs, std::optional<std::size_t> stop_after = {}) const {
    sweep::SweepOptions o;
    o.csv = dir_ / out / "results.csv";
    o.effective = dir_ / out / "scenario.effective.json";
    o.jobs = jobs;
    o.stop_after = stop_after;
    return o;
  }

  // Runs the sweep on `jobs.size()` ranks, rank r with jobs[r] threads.
  std::vector<RankResult> run(const std::string& out, const std::vector<unsigned>& jobs,
                              std::optional<std::size_t> stop_after = {}) {
    World world(static_cast<int>(jobs.size()));
    std::vector<RankResult> results(jobs.size());
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < jobs.size(); ++r)
      threads.emplace_back([&, r] {
        World::Rank rank(world, static_cast<int>(r));
        try {
          results[r].outcome = sweep::run_sweep(loader_, resolved_, "parm.json", options(out, jobs[r], stop_after), &rank);
        } catch (const sweep::StoppedByPeer& e) {
          results[r].code = e.exit_code;
        } catch (const InputError& e) {
          results[r].code = 2;
          results[r].error = e.what();
        } catch (const std::exception& e) {
          results[r].code = 1;
          results[r].error = e.what();
        }
      });
    for (auto& t : threads) t.join();
    return results;
  }

  std::string single(const std::string& out) {
    const auto outcome = sweep::run_sweep(loader_, resolved_, "parm.json", options(out, 1));
    EXPECT_EQ(outcome.points, 36u);
    EXPECT_FALSE(outcome.stopped_early);
    return read(out);
  }

  std::string read(const std::string& out) const { return slurp((dir_ / out / "results.csv").string()); }

  scenario::Loader loader_ = test::loader();
  Json resolved_;
  fs::path dir_;
};

TEST_F(SweepRanks, CsvIsTheSingleProcessOne) {
  const std::string reference = single("single");
  ASSERT_EQ(std::count(reference.begin(), reference.end(), '\n'), 37);
  for (const auto& jobs : std::vector<std::vector<unsigned>>{{1, 1}, {1, 2, 1}, {2, 1, 1, 3}}) {
    const std::string out = "ranks" + std::to_string(jobs.size());
    const auto results = run(out, jobs);
    for (std::size_t r = 0; r < results.size(); ++r) {
      EXPECT_EQ(results[r].code, 0) << "rank " << r << ": " << results[r].error;
      EXPECT_FALSE(results[r].outcome.stopped_early) << "rank " << r;
    }
    EXPECT_EQ(results[0].outcome.ran, 36u);
    EXPECT_EQ(read(out), reference) << jobs.size() << " ranks";
    EXPECT_EQ(slurp((dir_ / out / "scenario.effective.json").string()),
              slurp((dir_ / "single" / "scenario.effective.json").string()));
  }
}

TEST_F(SweepRanks, StoppedEarlyResumesUnderOtherRanks) {
  const std::string reference = single("single");
  // 3 ranks stop after 10 new rows (every rank says so: exit code 3 for all), 2 ranks after 10
  // more, then one process finishes.
  auto results = run("r", {1, 1, 1}, 10);
  for (const auto& r : results) EXPECT_TRUE(r.outcome.stopped_early);
  std::string text = read("r");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 11);
  EXPECT_EQ(text, reference.substr(0, text.size()));
  results = run("r", {2, 1}, 10);
  EXPECT_EQ(results[0].outcome.already_done, 10u);
  text = read("r");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 21);
  const auto outcome = sweep::run_sweep(loader_, resolved_, "parm.json", options("r", 2));
  EXPECT_EQ(outcome.already_done, 20u);
  EXPECT_EQ(read("r"), reference);
}

TEST_F(SweepRanks, FailureOnRankZeroAloneStopsEveryRank) {
  // A CSV of another sweep where rank 0 writes: rank 0 refuses it (exit 2, its message), the
  // others stop quietly with the same code; nothing ran, the file is left alone.
  fs::create_directories(dir_ / "foreign");
  std::ofstream(dir_ / "foreign" / "results.csv") << "point,x\n0,1\n";
  const auto results = run("foreign", {1, 1, 1});
  EXPECT_EQ(results[0].code, 2);
  EXPECT_NE(results[0].error.find("was not written by this sweep"), std::string::npos) << results[0].error;
  for (std::size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(results[r].code, 2) << "rank " << r;
    EXPECT_EQ(results[r].error, "") << "rank " << r;
  }
  EXPECT_EQ(read("foreign"), "point,x\n0,1\n");
}

}  // namespace
