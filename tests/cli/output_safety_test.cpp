// Where moesim writes, and what it never does (issue 45): it refuses `/` and the system's folders,
// refuses a folder another moesim is writing (instead of interleaving two sweeps' rows), never
// writes through a link planted in the output folder, and a run stopped by SIGINT/SIGTERM leaves
// no temporary, no lock file and no folder it created.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

class OutputSafety : public CliTest {
 protected:
  // The quickstart as a two-point sweep (micro-batch 4 and 8).
  static OrderedJson two_point_sweep() {
    OrderedJson doc = quickstart();
    doc["sweep"] = {{"axes", OrderedJson::array({{{"path", "training.micro_batch_size"}, {"values", {4, 8}}}})}};
    return doc;
  }
};

TEST_F(OutputSafety, RootAndSystemFoldersAreRefused) {
  for (const std::string folder : {"/", "/etc", "/usr/share/moesim-out", "/proc/self"}) {
    const Result r = moesim({"run", kQuickstart.string(), "--out", folder});
    EXPECT_EQ(r.code, 2) << folder << "\n" << describe(r);
    EXPECT_EQ(r.err, fmt::format("moesim: error: --out: {}: is the root folder or a folder of the system itself; give a "
                                 "folder of your own, e.g. out/NAME\n",
                                 folder))
        << describe(r);
  }
  EXPECT_FALSE(fs::exists("/usr/share/moesim-out"));
  EXPECT_FALSE(fs::exists("/results.json"));
}

TEST_F(OutputSafety, AFolderAnotherMoesimWritesIsRefused) {
  // This test holds the folder's lock as a running moesim would: run and sweep are refused with
  // exit 2, naming the holder; nothing is written. Released, both go on.
  const fs::path out = root_ / "held";
  fs::create_directories(out);
  const fs::path lock = out / ".moesim.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string holder = "pid 1: moesim sweep into held/results.csv\n";
  ASSERT_EQ(::write(fd, holder.data(), holder.size()), static_cast<ssize_t>(holder.size()));
  const fs::path sweep = scenario("sweep.json", two_point_sweep());
  const std::string refused = fmt::format("moesim: error: --out: {}: is being written by another moesim (pid 1: moesim sweep into "
                                          "held/results.csv); wait for it to finish, or give another folder\n",
                                          out.string());
  Result r = moesim({"sweep", sweep.string(), "--out", out.string(), "--quiet"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(r.err, refused);
  r = moesim({"run", kQuickstart.string(), "--out", out.string(), "--quiet"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(r.err, refused);
  EXPECT_EQ(listing(out), std::set<std::string>{".moesim.lock"});
  ::close(fd);  // the holder ends
  r = moesim({"sweep", sweep.string(), "--out", out.string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(split_lines(read_text(out / "results.csv")).size(), 3u);  // header and the two points
  // A normal end removes the lock file.
  EXPECT_EQ(listing(out), (std::set<std::string>{"results.csv", "scenario.effective.json"}));
}

TEST_F(OutputSafety, ARunAndASweepDoNotShareAFolder) {
  // Both keep scenario.effective.json beside their results: a run into a sweep's folder replaced
  // the sweep's, and its resume was then refused. Each refuses the other's folder, exit 2.
  const fs::path swept = root_ / "swept", ran = root_ / "ran";
  ASSERT_EQ(moesim({"sweep", scenario("sweep.json", two_point_sweep()).string(), "--out", swept.string(), "--quiet"}).code, 0);
  Result r = moesim({"run", kQuickstart.string(), "--out", swept.string(), "--quiet"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("holds a sweep's results.csv"), std::string::npos) << describe(r);
  ASSERT_EQ(moesim({"run", kQuickstart.string(), "--out", ran.string(), "--quiet"}).code, 0);
  r = moesim({"sweep", (work_ / "sweep.json").string(), "--out", ran.string(), "--quiet"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("holds a run's results.json"), std::string::npos) << describe(r);
  EXPECT_EQ(listing(ran), (std::set<std::string>{"results.json", "scenario.effective.json"}));
}

TEST_F(OutputSafety, PlantedLinksAreNeverWrittenThrough) {
  const fs::path victim = root_ / "victim.txt";
  write_text(victim, "keep\n");
  // A link planted as the lock file: refused, the file it points to untouched.
  const fs::path a = root_ / "a";
  fs::create_directories(a);
  fs::create_symlink(victim, a / ".moesim.lock");
  Result r = moesim({"run", kQuickstart.string(), "--out", a.string(), "--quiet"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find(".moesim.lock: Too many levels of symbolic links; remove the link planted there"), std::string::npos)
      << describe(r);
  // Links planted as the outputs themselves: the outputs replace the links, the file they point
  // to is untouched.
  const fs::path b = root_ / "b";
  fs::create_directories(b);
  fs::create_symlink(victim, b / "results.json");
  fs::create_symlink(victim, b / "scenario.effective.json");
  r = moesim({"run", kQuickstart.string(), "--out", b.string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_FALSE(fs::is_symlink(b / "results.json"));
  EXPECT_FALSE(fs::is_symlink(b / "scenario.effective.json"));
  // A sweep's CSV planted as a link: its header is not this sweep's, so it is refused unread past
  // the header and never appended to.
  const fs::path c = root_ / "c";
  fs::create_directories(c);
  fs::create_symlink(victim, c / "results.csv");
  r = moesim({"sweep", scenario("sweep.json", two_point_sweep()).string(), "--out", c.string(), "--quiet"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(read_text(victim), "keep\n");
}

TEST_F(OutputSafety, ASignalLeavesNothingTheRunCreated) {
  // A run of 400 iterations with a trace takes seconds; SIGTERM (then SIGINT) after 0.3 s ends it
  // by the signal, and the folder it created is gone with its lock file.
  OrderedJson doc = quickstart();
  doc["training"]["iterations"] = 400;
  const fs::path file = scenario("long.json", doc);
  for (const std::string signal : {"TERM", "INT"}) {
    const fs::path out = root_ / ("stopped-" + signal);
    const Result r = moesim({"run", file.string(), "--out", out.string(), "--trace", "--quiet"},
                            fmt::format("exec timeout -s {} 0.3", signal));
    EXPECT_EQ(r.code, 124) << describe(r);  // timeout's status when it sent the signal
    EXPECT_FALSE(fs::exists(out)) << signal;
  }
  EXPECT_EQ(listing(work_), std::set<std::string>{"long.json"});
}

}  // namespace
}  // namespace moesim_cli
