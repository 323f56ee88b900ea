// One voice for the apps' errors on stderr: every message starts with the
// app's name, "<app>: <option>: <problem>" for something the user gave
// (docs/DESIGN.md "Error handling"). CLI11 reports its own parse errors
// ("The following argument was not expected: --x") without a name;
// cli_exit adds it. No DPDK here: the virtual-time apps include it too.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string_view>

namespace droce::apps {

// What main() returns after CLI::App::parse threw `e`. --help prints as
// CLI11 prints it and gives 0; a parse error prints "<app>: <CLI11's
// message>" and the command that lists the options (`help`), and gives 2.
inline int cli_exit(const CLI::App& cli, const CLI::ParseError& e, std::string_view app,
                    std::string_view help = "--help") {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return cli.exit(e);
  fmt::print(stderr, "{}: {}\n", app, e.what());
  fmt::print(stderr, "run '{} {}' for the options\n", app, help);
  return 2;
}

}  // namespace droce::apps
