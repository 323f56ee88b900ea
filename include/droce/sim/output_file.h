// An output file as the simulator's tools write them (droce-sim's CSV
// files and summary.json, droce-pktgen's time series): rows formatted with
// fmt into a buffer written out in large pieces, and the file closed and
// checked, so that a file the disk or a file size limit cut short is an
// error, never a truncated output and a successful exit.
//
// Why not iostreams: a long run's series are hundreds of MB of rows, and
// formatting them with operator<< took longer than the run.
#pragma once

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

namespace droce::sim {

class OutputFile {
 public:
  // Creates `dir`/`name`. Throws std::runtime_error "<dir>/<name>: cannot
  // write".
  OutputFile(const std::string& dir, const std::string& name);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() = default;  // unclosed (an exception on its way): nothing checked

  // One line: `format` with `args`, then a newline.
  template <class... Args>
  void row(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(buf_), format, std::forward<Args>(args)...);
    buf_.push_back('\n');
    if (buf_.size() >= kFlushBytes) flush();
  }
  // `text` as it is.
  void text(std::string_view text);
  // The file as a stream, for writers of their own (what row() buffered is
  // written first).
  std::ostream& stream();
  // Writes what is buffered and closes the file. Throws std::runtime_error
  // "<dir>/<name>: could not be written whole" when any write failed.
  void close();

 private:
  static constexpr size_t kFlushBytes = 1 << 16;
  void flush();

  std::string path_;
  std::ofstream out_;
  fmt::memory_buffer buf_;
};

}  // namespace droce::sim
