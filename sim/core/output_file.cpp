#include "sim/core/output_file.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <memory>
#include <streambuf>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/error.hpp"

namespace moesim {

namespace fs = std::filesystem;

namespace {

// What a signal removes (temporaries being written, a held lock's file, a folder a run created),
// in fixed slots the handler reads without allocating or locking: 0 free, 1 being claimed, 2 a
// file to unlink, 3 a folder to remove if empty (after the files).
constexpr std::size_t kSlots = 64;
constexpr std::size_t kPathMax = 4096;
constexpr int kFree = 0, kClaimed = 1, kFile = 2, kFolder = 3;
std::array<std::atomic<int>, kSlots> g_state{};
std::array<std::array<char, kPathMax>, kSlots> g_path{};

extern "C" void remove_on_signal_and_reraise(int sig) {
  for (const int kind : {kFile, kFolder})
    for (std::size_t i = 0; i < kSlots; ++i)
      if (g_state[i].load(std::memory_order_acquire) == kind) {
        if (kind == kFile) ::unlink(g_path[i].data());
        else ::rmdir(g_path[i].data());
      }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// An ostream's buffer over a file descriptor: every write checked, the first failure's errno kept.
class FdBuffer : public std::streambuf {
 public:
  explicit FdBuffer(int fd) : fd_(fd) { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* p = pbase();
    while (p < pptr()) {
      const ssize_t n = ::write(fd_, p, static_cast<std::size_t>(pptr() - p));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!error_) error_ = n < 0 ? errno : EIO;
        return false;
      }
      p += n;
    }
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return true;
  }
  int fd_;
  int error_ = 0;
  std::array<char, 1 << 16> buffer_{};
};

// One output being written: its temporary, created exclusively beside it.
struct Temporary {
  fs::path target, path;
  RemovedOnSignal on_signal;

  explicit Temporary(const fs::path& target_) : target(target_) {}
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() { discard(); }

  [[noreturn]] void fail(int err) {
    discard();
    throw OutputError(fmt::format("cannot write {}: {}", target.string(), err ? std::strerror(err) : "the write failed"));
  }

  void discard() {
    if (!path.empty()) ::unlink(path.c_str());
    on_signal = {};
    path.clear();
  }

  // Writes the whole content to a fresh temporary (a name this process alone uses; a file or link
  // already there is never opened: the next name is tried).
  void write(const OutputWriter& writer) {
    static std::atomic<unsigned> counter{0};
    const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
      path = folder / fmt::format(".{}.{}-{}.tmp", target.filename().string(), ::getpid(), counter++);
      on_signal = RemovedOnSignal(path, false);
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd < 0) {
        const int err = errno;
        on_signal = {};
        path.clear();
        if (err != EEXIST) fail(err);
      }
    }
    if (fd < 0) fail(EEXIST);
    FdBuffer buffer(fd);
    std::ostream out(&buffer);
    errno = 0;
    writer(out);
    out.flush();
    const int write_error = !out ? (buffer.error() ? buffer.error() : EIO) : 0;
    const int close_error = ::close(fd) != 0 ? errno : 0;
    if (write_error || close_error) fail(write_error ? write_error : close_error);
  }

  void commit() {
    if (::rename(path.c_str(), target.c_str()) != 0) fail(errno);
    on_signal = {};
    path.clear();
  }
};

// `/` and the folders the system itself lives in (the folder or anything under it); /var and /run
// themselves, but not what is under them (/var/tmp, /run/user).
bool system_folder(const fs::path& folder) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(folder, ec), ec);
  if (ec) return false;
  const std::string s = p.lexically_normal().string();
  if (s == "/" || s == "/var" || s == "/run") return true;
  for (const char* root : {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr"}) {
    const std::string r = root;
    if (s == r || s.rfind(r + "/", 0) == 0) return true;
  }
  return false;
}

}  // namespace

RemovedOnSignal::RemovedOnSignal(const fs::path& path, bool folder) {
  const std::string p = path.string();
  if (p.size() >= kPathMax) return;  // left behind by a signal; written as safely
  for (std::size_t i = 0; i < kSlots; ++i) {
    int free = kFree;
    if (!g_state[i].compare_exchange_strong(free, kClaimed, std::memory_order_acquire)) continue;
    std::memcpy(g_path[i].data(), p.c_str(), p.size() + 1);
    g_state[i].store(folder ? kFolder : kFile, std::memory_order_release);
    slot_ = static_cast<int>(i);
    return;
  }
}

RemovedOnSignal& RemovedOnSignal::operator=(RemovedOnSignal&& o) noexcept {
  if (this != &o) {
    if (slot_ >= 0) g_state[static_cast<std::size_t>(slot_)].store(kFree, std::memory_order_release);
    slot_ = std::exchange(o.slot_, -1);
  }
  return *this;
}

RemovedOnSignal::~RemovedOnSignal() {
  if (slot_ >= 0) g_state[static_cast<std::size_t>(slot_)].store(kFree, std::memory_order_release);
}

void install_output_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = remove_on_signal_and_reraise;
  sigemptyset(&action.sa_mask);
  for (const int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &action, nullptr);
}

void write_file(const fs::path& path, const std::string& text) {
  write_file(path, [&](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

void write_file(const fs::path& path, const OutputWriter& write) { write_files({{path, write}}); }

void write_files(const std::vector<std::pair<fs::path, OutputWriter>>& files) {
  std::vector<std::unique_ptr<Temporary>> temps;
  temps.reserve(files.size());
  for (const auto& [path, writer] : files) {
    temps.push_back(std::make_unique<Temporary>(path));
    temps.back()->write(writer);  // a failure here: every temporary removed as `temps` goes
  }
  for (auto& t : temps) t->commit();
}

bool prepare_output_folder(const fs::path& folder, const std::string& flag) {
  const std::string name = folder.string();
  if (system_folder(folder))
    throw InputError(flag, name, "is the root folder or a folder of the system itself",
                     "give a folder of your own, e.g. out/NAME");
  std::error_code ec;
  const auto status = fs::status(folder, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    throw InputError(flag, name, "exists and is not a folder", "give a folder (it is created if missing)");
  bool created = false;
  if (!fs::exists(status)) {
    created = fs::create_directories(folder, ec);
    if (ec)
      throw InputError(flag, name, fmt::format("cannot create the folder: {}", ec.message()),
                       "give a folder you can write, e.g. out/NAME");
  }
  // Probe: a file that can be created here can be written (the disk may still fill up later;
  // every write is checked).
  std::string probe = (folder / ".moesim-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    const int err = errno;
    if (created) fs::remove(folder, ec);
    throw InputError(flag, name, fmt::format("cannot write in the folder: {}", std::strerror(err)),
                     "give a folder you can write, e.g. out/NAME");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return created;
}

void remove_if_empty(const fs::path& folder) {
  std::error_code ec;
  if (fs::is_directory(folder, ec) && fs::is_empty(folder, ec)) fs::remove(folder, ec);
}

OutputFolderLock::OutputFolderLock(const fs::path& folder, const std::string& flag, const std::string& holder)
    : file_(folder / ".moesim.lock") {
  const std::string name = folder.empty() ? "." : folder.string();
  // The file at the path may be replaced between open and flock by a holder that ends (it removes
  // the file while it still holds it): a lock won on a removed file is taken again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(file_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int err = errno;
      throw InputError(flag, name, fmt::format("cannot create {}: {}", file_.filename().string(), std::strerror(err)),
                       err == ELOOP ? "remove the link planted there" : "give a folder you can write, e.g. out/NAME");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string who(512, '\0');
      const ssize_t n = ::pread(fd, who.data(), who.size(), 0);
      who.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
      while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
      ::close(fd);
      if (err != EWOULDBLOCK)
        throw InputError(flag, name, fmt::format("cannot lock {}: {}", file_.filename().string(), std::strerror(err)),
                         "give a folder on a local disk, e.g. out/NAME");
      throw InputError(flag, name,
                       fmt::format("is being written by another moesim ({})", who.empty() ? "its process did not say which" : who),
                       "wait for it to finish, or give another folder");
    }
    struct stat held {}, now {};
    if (::fstat(fd, &held) == 0 && ::lstat(file_.c_str(), &now) == 0 && held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
      const std::string text = holder + "\n";
      // The holder's name is advice to whoever is refused: a failure to write it changes nothing.
      if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, text.data(), text.size(), 0) < 0) errno = 0;
      fd_ = fd;
      on_signal_ = RemovedOnSignal(file_, false);
      return;
    }
    ::close(fd);
  }
  throw InputError(flag, name, "its lock file keeps being replaced", "give another folder");
}

OutputFolderLock::~OutputFolderLock() {
  if (fd_ < 0) return;
  on_signal_ = {};
  ::unlink(file_.c_str());  // while still held: no other process can hold this file
  ::close(fd_);
}

}  // namespace moesim
