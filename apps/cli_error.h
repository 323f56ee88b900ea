// One voice for the apps' errors on stderr: every message starts with the
// app's name, "<app>: <option>: <problem>" for something the user gave
// (docs/DESIGN.md "Error handling"). CLI11 reports its own parse errors
// ("The following argument was not expected: --x") without a name;
// cli_exit adds it. No DPDK here: the virtual-time apps include it too.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
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

// Writes `text` to `path`, which `option` named, whole. Otherwise (no such
// directory, a full disk, a file size limit) prints "<app>: <option>:
// <path>: <why>" and returns false: an output cut short is never left
// behind a successful exit.
inline bool write_whole_file(std::string_view app, std::string_view option,
                             const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    fmt::print(stderr, "{}: {}: {}: cannot write: {}\n", app, option, path, std::strerror(errno));
    return false;
  }
  const bool whole = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !whole) {
    fmt::print(stderr, "{}: {}: {}: could not be written whole\n", app, option, path);
    return false;
  }
  return true;
}

}  // namespace droce::apps
