// Typed reading of TOML tables (toml++) for droce's configuration files:
// droce-sim scenarios and droce-switch's --config. Every key is checked
// against the list its table accepts and every value against its type and
// range; a mistake throws ScenarioError "FILE:LINE:COL: key.path: what".
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "droce/fabric/link.h"
#include "droce/sim/scenario.h"

namespace droce::sim {

constexpr uint64_t kMinRate = 1'000'000;                 // 1 Mb/s
constexpr uint64_t kMaxRate = 1600 * fabric::kGbps;      // 1.6 Tb/s

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::source_region& where, const std::string& path,
                         const std::string& what) const {
    std::ostringstream m;
    m << file_ << ':' << where.begin.line << ':' << where.begin.column << ": " << path
      << ": " << what;
    throw ScenarioError(m.str());
  }

  // Refuses keys not in `allowed`.
  void check_keys(const toml::table& t, const std::string& path,
                  std::initializer_list<std::string_view> allowed) const {
    check_keys(t, path, std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }
  void check_keys(const toml::table& t, const std::string& path,
                  std::span<const std::string_view> allowed) const {
    for (auto&& [k, v] : t) {
      if (std::find(allowed.begin(), allowed.end(), k.str()) != allowed.end()) continue;
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(k.source(), join(path, k.str()), "unknown key (accepted: " + list + ")");
    }
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  const toml::table* table(const toml::table& t, std::string_view key,
                           const std::string& path) const {
    const toml::node* n = t.get(key);
    if (!n) return nullptr;
    if (!n->is_table()) fail(n->source(), join(path, key), "expected a table");
    return n->as_table();
  }

  bool str(const toml::table& t, std::string_view key, const std::string& path,
           std::string& out) const {
    const toml::node* n = t.get(key);
    if (!n) return false;
    if (!n->is_string()) fail(n->source(), join(path, key), "expected a string");
    out = n->as_string()->get();
    return true;
  }

  bool boolean(const toml::table& t, std::string_view key, const std::string& path,
               bool& out) const {
    const toml::node* n = t.get(key);
    if (!n) return false;
    if (!n->is_boolean()) fail(n->source(), join(path, key), "expected true or false");
    out = n->as_boolean()->get();
    return true;
  }

  bool number(const toml::table& t, std::string_view key, const std::string& path,
              double& out, double lo, double hi) const {
    const toml::node* n = t.get(key);
    if (!n) return false;
    if (n->is_integer()) {
      out = static_cast<double>(n->as_integer()->get());
    } else if (n->is_floating_point()) {
      out = n->as_floating_point()->get();
    } else {
      fail(n->source(), join(path, key), "expected a number");
    }
    if (!(out >= lo && out <= hi)) {
      std::ostringstream m;
      m << "out of range " << lo << ".." << hi;
      fail(n->source(), join(path, key), m.str());
    }
    return true;
  }

  bool integer(const toml::table& t, std::string_view key, const std::string& path,
               uint64_t& out, uint64_t lo, uint64_t hi) const {
    const toml::node* n = t.get(key);
    if (!n) return false;
    if (!n->is_integer()) fail(n->source(), join(path, key), "expected an integer");
    const int64_t v = n->as_integer()->get();
    if (v < 0 || static_cast<uint64_t>(v) < lo || static_cast<uint64_t>(v) > hi)
      fail(n->source(), join(path, key),
           "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    out = static_cast<uint64_t>(v);
    return true;
  }

  // A quantity given as a string with a unit, or a bare integer in the base
  // unit (bits/s, ns, bytes).
  bool quantity(const toml::table& t, std::string_view key, const std::string& path,
                uint64_t& out, bool (*parser)(std::string_view, uint64_t&),
                const char* example, uint64_t lo, uint64_t hi) const {
    const toml::node* n = t.get(key);
    if (!n) return false;
    uint64_t v = 0;
    if (n->is_integer() && n->as_integer()->get() >= 0) {
      v = static_cast<uint64_t>(n->as_integer()->get());
    } else if (!n->is_string() || !parser(n->as_string()->get(), v)) {
      fail(n->source(), join(path, key), std::string("expected a value like ") + example);
    }
    if (v < lo || v > hi)
      fail(n->source(), join(path, key),
           "out of range " + std::to_string(lo) + ".." + std::to_string(hi) +
               (parser == &parse_rate_bps ? " bit/s (1 Mb/s .. 1.6 Tb/s)" : ""));
    out = v;
    return true;
  }
  bool rate(const toml::table& t, std::string_view key, const std::string& path,
            uint64_t& out) const {
    return quantity(t, key, path, out, &parse_rate_bps, "\"100G\" or \"25Gbps\"", kMinRate,
                    kMaxRate);
  }
  bool time(const toml::table& t, std::string_view key, const std::string& path,
            uint64_t& out, uint64_t hi = uint64_t{3600} * 1'000'000'000) const {
    return quantity(t, key, path, out, &parse_time_ns, "\"1us\" or \"500ns\"", 0, hi);
  }
  bool bytes(const toml::table& t, std::string_view key, const std::string& path,
             uint64_t& out, uint64_t lo = 0, uint64_t hi = uint64_t{1} << 40) const {
    return quantity(t, key, path, out, &parse_bytes, "\"4KiB\" or \"1MB\"", lo, hi);
  }

  template <class E>
  bool choice(const toml::table& t, std::string_view key, const std::string& path, E& out,
              std::initializer_list<std::pair<std::string_view, E>> options) const {
    std::string s;
    if (!str(t, key, path, s)) return false;
    std::string list;
    for (auto& [name, value] : options) {
      if (name == s) {
        out = value;
        return true;
      }
      list += (list.empty() ? "" : ", ") + std::string(name);
    }
    fail(t.get(key)->source(), join(path, key), "\"" + s + "\" is not one of: " + list);
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// A switch table: buffer, buffer_mode, port_buffer, classifier, ecn, pfc,
// int, scheduler (docs/SIM.md), plus `extra_keys` the caller reads itself.
void read_switch_table(const Reader& r, const toml::table& t, const std::string& path,
                       SwitchSpec& s, std::initializer_list<std::string_view> extra_keys);

}  // namespace droce::sim
