// sim/core/output_file: outputs written whole or not at all, and a signal in the middle of a
// write leaves nothing behind (each case in a forked child, which the signal ends).
#include <algorithm>
#include <csignal>
#include <functional>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "sim/core/error.hpp"
#include "sim/core/output_file.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt_name();
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string fmt_name() {
    return "moesim-output-file-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  // Runs `body` in a child process; returns the signal that ended it (0 if it exited).
  static int in_child(const std::function<void()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      body();
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  fs::path dir_;
};

TEST_F(OutputFile, ASignalDuringAWriteRemovesItsTemporaries) {
  // The first file is written whole, the second's writer is interrupted by SIGTERM half-way: the
  // child ends by the signal, and neither file nor either temporary is left (write_files renames
  // none until all are written).
  for (const int sig : {SIGTERM, SIGINT}) {
    const int ended_by = in_child([&] {
      install_output_signal_handlers();
      write_files({{dir_ / "a.json", [](std::ostream& o) { o << "{}\n"; }},
                   {dir_ / "b.json", [&](std::ostream& o) {
                      o << std::string(1 << 20, 'x');
                      o.flush();
                      ::raise(sig);
                    }}});
    });
    EXPECT_EQ(ended_by, sig);
    EXPECT_TRUE(names().empty()) << names().front();
  }
}

TEST_F(OutputFile, ASignalRemovesAHeldLockAndAnEmptyFolderRegisteredForIt) {
  const fs::path folder = dir_ / "created";
  fs::create_directories(folder);
  const int ended_by = in_child([&] {
    install_output_signal_handlers();
    const RemovedOnSignal created(folder, true);
    const OutputFolderLock lock(folder, "--out", "test");
    ::raise(SIGTERM);
  });
  EXPECT_EQ(ended_by, SIGTERM);
  EXPECT_TRUE(names().empty());
}

TEST_F(OutputFile, AllFilesOrNone) {
  // The second writer fails (its stream goes bad): no file is renamed into place, no temporary
  // stays, and an older file of the same name is kept as it was.
  std::ofstream(dir_ / "a.json") << "old\n";
  EXPECT_THROW(write_files({{dir_ / "a.json", [](std::ostream& o) { o << "new\n"; }},
                            {dir_ / "b.json", [](std::ostream& o) { o.setstate(std::ios::badbit); }}}),
               OutputError);
  EXPECT_EQ(names(), std::vector<std::string>{"a.json"});
  std::ifstream in(dir_ / "a.json");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "old");
  // Without a failure both land.
  write_files({{dir_ / "a.json", [](std::ostream& o) { o << "new\n"; }}, {dir_ / "b.json", [](std::ostream& o) { o << "b\n"; }}});
  EXPECT_EQ(names(), (std::vector<std::string>{"a.json", "b.json"}));
}

TEST_F(OutputFile, ASecondLockOnAFolderIsRefusedNamingTheFirst) {
  const OutputFolderLock first(dir_, "--out", "pid 7: moesim sweep");
  try {
    const OutputFolderLock second(dir_, "--out", "pid 8: moesim run");
    FAIL() << "a second lock was granted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.problem(), "is being written by another moesim (pid 7: moesim sweep)");
  }
}

}  // namespace
}  // namespace moesim
