// Writing moesim's outputs so that no failure leaves a file a reader would trust, and no write
// lands anywhere but where it was asked to.
// - A whole file is written to a temporary beside it, created exclusively under a name no other
//   writer uses (O_CREAT|O_EXCL|O_NOFOLLOW: a file or link planted there is never opened), and
//   renamed only once every byte was written (checked: a full disk or a file-size limit is an
//   OutputError naming the file, never a silent truncation). A set of files that belong together
//   (a run's trace, effective scenario and results) is renamed only once all of them are written.
// - SIGINT and SIGTERM remove the temporaries being written (install_output_signal_handlers).
// - An output folder is created and probed for writing before a run starts, so a bad --out costs
//   nothing; `/` and the system's own folders are refused.
// - An output folder is held by one moesim process at a time (OutputFolderLock).
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace moesim {

// Writing an output failed (exit code 1: the input was fine, the disk or the folder was not).
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using OutputWriter = std::function<void(std::ostream&)>;

void write_file(const std::filesystem::path& path, const std::string& text);
// The same, the content streamed by `write` (no copy of it in memory).
void write_file(const std::filesystem::path& path, const OutputWriter& write);
// All of `files` or none: each is written to its temporary, then all are renamed in order (put
// the file whose presence says the rest is complete last). A failure removes every temporary.
void write_files(const std::vector<std::pair<std::filesystem::path, OutputWriter>>& files);

// A file (or an empty folder) that SIGINT and SIGTERM remove while this is alive: a temporary
// being written, a held lock's file, a folder a run created. Up to 64 at once (more are written
// as safely, only a signal would leave them behind).
class RemovedOnSignal {
 public:
  RemovedOnSignal() = default;
  RemovedOnSignal(const std::filesystem::path& path, bool folder);
  RemovedOnSignal(RemovedOnSignal&& o) noexcept { *this = std::move(o); }
  RemovedOnSignal& operator=(RemovedOnSignal&& o) noexcept;
  ~RemovedOnSignal();

 private:
  int slot_ = -1;
};

// SIGINT and SIGTERM remove the temporaries being written, then end the process as the signal
// would have. Called once, at start.
void install_output_signal_handlers();

// Creates `folder` (and its parents) and checks a file can be created in it. Throws InputError
// naming `flag` ("--out") when it is a file, `/` or a system folder, cannot be created or is not
// writable. Returns whether the folder was created by this call (a failed run removes what it
// created).
bool prepare_output_folder(const std::filesystem::path& folder, const std::string& flag);

// Removes `folder` if it is empty: a run that failed leaves no empty folder it created.
void remove_if_empty(const std::filesystem::path& folder);

// One writer per output folder: an advisory lock (flock) on FOLDER/.moesim.lock, which names its
// holder. A second `run` or `sweep` on the folder is refused (InputError naming `flag`, the folder
// and the holder: exit code 2) instead of interleaving its rows with the first's. The kernel
// releases the lock however the holder ends (SIGKILL included), so a killed sweep resumes at once;
// a normal end removes the file.
class OutputFolderLock {
 public:
  OutputFolderLock(const std::filesystem::path& folder, const std::string& flag, const std::string& holder);
  ~OutputFolderLock();
  OutputFolderLock(const OutputFolderLock&) = delete;
  OutputFolderLock& operator=(const OutputFolderLock&) = delete;

 private:
  std::filesystem::path file_;
  int fd_ = -1;
  RemovedOnSignal on_signal_;
};

}  // namespace moesim
