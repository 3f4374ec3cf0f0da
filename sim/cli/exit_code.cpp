// See exit_code.hpp.
#include "sim/cli/exit_code.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <iostream>
#include <new>

#include "sim/core/error.hpp"
#include "sim/core/output_file.hpp"
#include "sim/sweep/ranks.hpp"

namespace moesim::cli {

int exit_code(const std::exception_ptr& failure, bool print) {
  const auto say = [&](const std::string& line) {
    if (print) std::cerr << one_line(line) << "\n";
  };
  try {
    std::rethrow_exception(failure);
  } catch (const sweep::StoppedByPeer& e) {
    return e.exit_code;  // another rank of the sweep failed and said why
  } catch (const InputError& e) {
    say(fmt::format("moesim: error: {}", e.what()));
    return 2;
  } catch (const InfeasibleError& e) {
    say(fmt::format("moesim: cannot run: {}", e.what()));
    return 2;
  } catch (const boost::program_options::error& e) {
    // One line, as every bad input: the usage is `moesim --help`.
    say(fmt::format("moesim: error: {}; `moesim --help` shows the usage", e.what()));
    return 2;
  } catch (const OutputError& e) {
    say(fmt::format("moesim: error: {}", e.what()));
    return 1;
  } catch (const std::bad_alloc&) {
    say("moesim: error: out of memory; the run needs more memory than the process may use (`moesim validate` "
        "shows the estimate; a smaller scenario or routing.sampling \"expected\" needs less)");
    return 1;
  } catch (const std::exception& e) {
    say(fmt::format("moesim: internal error: {} (please report it with the scenario)", e.what()));
    return 1;
  } catch (...) {
    say("moesim: internal error: unknown exception (please report it with the scenario)");
    return 1;
  }
}

}  // namespace moesim::cli
