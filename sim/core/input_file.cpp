#include "sim/core/input_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/error.hpp"
#include "sim/core/units.hpp"

namespace moesim {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::filesystem::path& file, std::uint64_t max_bytes) {
  const std::string name = file.string();
  // O_NONBLOCK: opening a FIFO with no writer must not hang; the type is checked on the open
  // descriptor itself, so the file cannot be swapped between the check and the read.
  Fd f{::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    const int err = errno;
    throw InputError(name, "", fmt::format("cannot open the file: {}", std::strerror(err)),
                     err == ENOENT || err == ENAMETOOLONG
                         ? "check the path (it is read relative to the current folder)"
                         : "check the path and that the file is readable");
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw InputError(name, "", fmt::format("is {}, not a regular file", kind_of(st.st_mode)),
                     "give the path of a file (moesim reads regular files only)");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw InputError(name, "",
                     fmt::format("is {}, more than the {} moesim reads from one input", format_bytes(static_cast<double>(st.st_size)),
                                 format_bytes(static_cast<double>(max_bytes))),
                     "check that this is the intended file (inputs are text of a few kilobytes to megabytes)");
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(name, "", fmt::format("cannot read the file: {}", std::strerror(errno)), "check the file and the disk");
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > max_bytes)  // it grew while being read
      throw InputError(name, "", fmt::format("grew past {} while being read", format_bytes(static_cast<double>(max_bytes))),
                       "give a file that is not being written");
  }
  return text;
}

}  // namespace moesim
