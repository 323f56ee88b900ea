// Named congestion-control profiles: an algorithm and a set of its
// parameters, kept as data files (TOML, one per profile) that cite where the
// values come from (cc/profiles/*.toml, docs/CC.md "Profiles"). Tools take a
// profile by name (--cc-profile dcqcn-paper) or by path and list them
// (--list).
//
// A profile file:
//
//   # comment: the source of every value
//   algorithm = "dcqcn"
//   summary = "one line"
//   source = "paper section, code file"
//   [params]
//   rp_time_reset = 55
//
// Reading files is kept out of the algorithm library (droce_cc): this is
// the separate droce_cc_profile library, so the algorithms still depend on
// nothing (DESIGN.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "droce/cc/params.h"

namespace droce::cc {

struct Profile {
  std::string name;       // file name without .toml
  std::string algorithm;  // a registered algorithm
  std::string summary;
  std::string source;
  std::string file;       // where it was read from
  ParamMap params;        // validated against the algorithm's table
};

// Where profiles are looked for, in order: each directory of
// $DROCE_CC_PROFILES (':'-separated), the source tree's cc/profiles, the
// installed share/droce/cc-profiles. Directories that do not exist are
// skipped.
std::vector<std::string> profile_dirs();

// Every profile found, by name (the first directory wins a name clash).
// Throws ConfigError when a file in those directories is malformed.
std::vector<Profile> list_profiles();

// A profile by name, or by path (anything with a '/' or ending in .toml).
// Throws ConfigError for an unknown name (listing the accepted ones), an
// unreadable file, a malformed one, an unknown algorithm or a parameter
// the algorithm refuses.
Profile load_profile(std::string_view name_or_path);

// Parses one profile's text; `name` and `file` are for messages.
Profile parse_profile(std::string_view text, const std::string& name, const std::string& file);

// "name  algorithm  summary" lines, then each profile's parameters and
// source: what --list prints.
std::string describe_profiles(const std::vector<Profile>& profiles);

}  // namespace droce::cc
