// Output files written through a buffer, closed and checked (output_file.h).
#include "droce/sim/output_file.h"

#include <filesystem>
#include <stdexcept>

namespace droce::sim {

OutputFile::OutputFile(const std::string& dir, const std::string& name)
    : path_(dir + "/" + name), out_(std::filesystem::path(dir) / name, std::ios::binary) {
  if (!out_) throw std::runtime_error(path_ + ": cannot write");
}

void OutputFile::text(std::string_view text) {
  buf_.append(text);
  if (buf_.size() >= kFlushBytes) flush();
}

void OutputFile::flush() {
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
}

std::ostream& OutputFile::stream() {
  flush();
  return out_;
}

void OutputFile::close() {
  flush();
  out_.close();
  if (!out_) throw std::runtime_error(path_ + ": could not be written whole");
}

}  // namespace droce::sim
