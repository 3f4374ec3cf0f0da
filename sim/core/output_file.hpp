// Writing moesim's outputs so that no failure leaves a file a reader would trust. A whole file is
// written to a temporary beside it and renamed only once every byte reached the disk (checked: a
// full disk or a file-size limit is an OutputError naming the file, never a silent truncation).
// An output folder is created and probed for writing before a run starts, so a bad --out costs
// nothing.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace moesim {

// Writing an output failed (exit code 1: the input was fine, the disk or the folder was not).
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void write_file(const std::filesystem::path& path, const std::string& text);
// The same, the content streamed by `write` (no copy of it in memory).
void write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

// Creates `folder` (and its parents) and checks a file can be created in it. Throws InputError
// naming `flag` ("--out") when it is a file, cannot be created or is not writable. Returns whether
// the folder was created by this call (a failed run removes what it created).
bool prepare_output_folder(const std::filesystem::path& folder, const std::string& flag);

// Removes `folder` if it is empty: a run that failed leaves no empty folder it created.
void remove_if_empty(const std::filesystem::path& folder);

}  // namespace moesim
