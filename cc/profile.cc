#include "droce/cc/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("cc profile file '{}': cannot read it", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string where(const std::string& file, const toml::source_region& src) {
  return fmt::format("{}:{}:{}", file, src.begin.line, src.begin.column);
}

// A required string key of the profile's top level.
std::string string_key(const toml::table& root, std::string_view key, const std::string& file) {
  const toml::node* n = root.get(key);
  if (n == nullptr)
    throw ConfigError(fmt::format("{}: missing key '{}' (a profile needs algorithm, summary, "
                                  "source and [params])",
                                  file, key));
  if (!n->is_string())
    throw ConfigError(fmt::format("{}: {}: expected a string", where(file, n->source()), key));
  return n->as_string()->get();
}

// A parameter value as the text the registry parses: integers as they are,
// floating point in the shortest form that reads back the same.
std::string value_text(const toml::node& v, std::string_view key, const std::string& file) {
  if (v.is_integer()) return fmt::format("{}", v.as_integer()->get());
  if (v.is_floating_point()) return fmt::format("{}", v.as_floating_point()->get());
  throw ConfigError(
      fmt::format("{}: params.{}: expected a number", where(file, v.source()), key));
}

std::string accepted(const std::vector<Profile>& all) {
  std::string out;
  for (const Profile& p : all) out += (out.empty() ? "" : ", ") + p.name;
  return out.empty() ? "(none found)" : out;
}

}  // namespace

std::vector<std::string> profile_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("DROCE_CC_PROFILES")) {
    std::string_view rest(env);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(dir);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
#ifdef DROCE_CC_PROFILES_SOURCE_DIR
  dirs.emplace_back(DROCE_CC_PROFILES_SOURCE_DIR);
#endif
#ifdef DROCE_CC_PROFILES_INSTALL_DIR
  dirs.emplace_back(DROCE_CC_PROFILES_INSTALL_DIR);
#endif
  std::vector<std::string> found;
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (fs::is_directory(d, ec)) found.push_back(d);
  }
  return found;
}

Profile parse_profile(std::string_view text, const std::string& name, const std::string& file) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw ConfigError(
        fmt::format("{}: {}", where(file, e.source()), std::string(e.description())));
  }
  for (auto&& [k, v] : root) {
    (void)v;
    const std::string_view key = k.str();
    if (key != "algorithm" && key != "summary" && key != "source" && key != "params")
      throw ConfigError(fmt::format("{}: {}: unknown key (accepted: algorithm, summary, "
                                    "source, params)",
                                    where(file, k.source()), key));
  }
  Profile p;
  p.name = name;
  p.file = file;
  p.algorithm = string_key(root, "algorithm", file);
  p.summary = string_key(root, "summary", file);
  p.source = string_key(root, "source", file);
  const AlgorithmInfo* info = find_algorithm(p.algorithm);
  if (info == nullptr)
    throw ConfigError(fmt::format("{}: algorithm: unknown cc algorithm '{}'; accepted: {}",
                                  where(file, root.get("algorithm")->source()), p.algorithm,
                                  algorithm_names()));
  if (const toml::node* n = root.get("params")) {
    if (!n->is_table())
      throw ConfigError(fmt::format("{}: params: expected a table", where(file, n->source())));
    for (auto&& [k, v] : *n->as_table())
      p.params[std::string(k.str())] = value_text(v, k.str(), file);
  }
  try {
    (void)resolve_params(info->name, info->params, p.params);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", file, e.what()));
  }
  return p;
}

std::vector<Profile> list_profiles() {
  std::vector<Profile> all;
  for (const std::string& dir : profile_dirs()) {
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const std::string name = f.stem().string();
      if (std::any_of(all.begin(), all.end(), [&](const Profile& p) { return p.name == name; }))
        continue;
      all.push_back(parse_profile(read_file(f.string()), name, f.string()));
    }
  }
  std::sort(all.begin(), all.end(),
            [](const Profile& a, const Profile& b) { return a.name < b.name; });
  return all;
}

Profile load_profile(std::string_view name_or_path) {
  const std::string arg(name_or_path);
  if (arg.find('/') != std::string::npos || arg.ends_with(".toml"))
    return parse_profile(read_file(arg), fs::path(arg).stem().string(), arg);
  std::vector<Profile> all = list_profiles();
  for (Profile& p : all)
    if (p.name == arg) return std::move(p);
  throw ConfigError(fmt::format("unknown cc profile '{}'; accepted: {} (or a path to a .toml "
                                "file)",
                                arg, accepted(all)));
}

std::string describe_profiles(const std::vector<Profile>& profiles) {
  std::string out;
  for (const Profile& p : profiles)
    out += fmt::format("{:<16} {:<7} {}\n", p.name, p.algorithm, p.summary);
  for (const Profile& p : profiles) {
    out += fmt::format("\n{} ({}, {})\n  source: {}\n ", p.name, p.algorithm, p.file, p.source);
    for (const auto& [k, v] : p.params) out += fmt::format(" {}={}", k, v);
    out += "\n";
  }
  return out;
}

}  // namespace droce::cc
