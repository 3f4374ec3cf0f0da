// `moesim calibrate fit`: measurements JSON or nccl-tests logs in, a calibration profile out
// (calibrate/fit/profile_builder.hpp), with a table of every entry's fit on stdout.
#pragma once

#include <string>
#include <vector>

namespace moesim::cli {

// Exit codes as the other commands: 0 done, 2 bad input (nothing written).
int cmd_calibrate(const std::vector<std::string>& args);

}  // namespace moesim::cli
