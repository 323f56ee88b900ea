// sim::OutputFile: rows, text and stream writes land in order, across the
// buffer's flushes; a file that cannot be opened or written whole throws,
// naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "droce/sim/output_file.h"
#include "sim_test_util.h"

namespace droce::sim {
namespace {

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(OutputFile, RowsTextAndStreamLandInOrder) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("droce-output-file-test." + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string expected = "a,b\n";
  {
    OutputFile o(dir.string(), "x.csv");
    o.text("a,b\n");
    // Far more than one buffer's worth, a stream write in the middle.
    for (int i = 0; i < 20000; ++i) {
      o.row("{},{:.3f}", i, i / 8.0);
      expected += std::to_string(i) + "," + fmt::format("{:.3f}", i / 8.0) + "\n";
      if (i == 12345) {
        o.stream() << "from the stream\n";
        expected += "from the stream\n";
      }
    }
    o.close();
  }
  EXPECT_EQ(testing::slurp(dir / "x.csv"), expected);
  std::filesystem::remove_all(dir);
}

TEST(OutputFile, AFileThatCannotBeOpenedIsNamed) {
  EXPECT_EQ(message_of([] { OutputFile o("/nonexistent-droce-dir", "x.csv"); }),
            "/nonexistent-droce-dir/x.csv: cannot write");
}

// /dev/full takes the open and refuses every write (ENOSPC), as a full
// disk does.
TEST(OutputFile, AFileCutShortIsAnError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  EXPECT_EQ(message_of([] {
              OutputFile o("/dev", "full");
              for (int i = 0; i < 100000; ++i) o.row("{}", i);
              o.close();
            }),
            "/dev/full: could not be written whole");
}

}  // namespace
}  // namespace droce::sim
