// The capture writer's files, read back with libpcap as any reader would.
#include "droce/telemetry/pcap_writer.h"

#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace droce::telemetry {
namespace {

std::string temp_path() {
  char name[] = "/tmp/droce_pcap_writer_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  ::close(fd);
  return name;
}

TEST(PcapWriter, FramesReadBackWithNanosecondTimes) {
  const std::string path = temp_path();
  const std::vector<uint8_t> a(60, 0xab), b(1500, 0x11);
  {
    PcapWriter w(path);
    w.write(a, 1'700'000'000'123'456'789ull);
    w.write(b, 1'700'000'001'000'000'001ull);
    EXPECT_EQ(w.frames(), 2u);
  }
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO,
                                                      err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
  EXPECT_EQ(pcap_get_tstamp_precision(p), PCAP_TSTAMP_PRECISION_NANO);
  pcap_pkthdr* h = nullptr;
  const u_char* data = nullptr;
  ASSERT_EQ(pcap_next_ex(p, &h, &data), 1);
  EXPECT_EQ(h->ts.tv_sec, 1'700'000'000);
  EXPECT_EQ(h->ts.tv_usec, 123'456'789);
  EXPECT_EQ(h->len, 60u);
  EXPECT_EQ(std::vector<uint8_t>(data, data + h->caplen), a);
  ASSERT_EQ(pcap_next_ex(p, &h, &data), 1);
  EXPECT_EQ(h->ts.tv_sec, 1'700'000'001);
  EXPECT_EQ(h->ts.tv_usec, 1);
  EXPECT_EQ(std::vector<uint8_t>(data, data + h->caplen), b);
  EXPECT_EQ(pcap_next_ex(p, &h, &data), PCAP_ERROR_BREAK);
  pcap_close(p);
  std::remove(path.c_str());
}

TEST(PcapWriter, AnUnwritablePathIsRefusedWithItsName) {
  try {
    PcapWriter w("/nonexistent-dir/x.pcap");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.pcap"), std::string::npos);
  }
}

TEST(PcapWriter, WallClockIsNearTheSystemClock) {
  const uint64_t t = PcapWriter::wall_now_ns();
  EXPECT_NEAR(static_cast<double>(t) / 1e9, static_cast<double>(::time(nullptr)), 2.0);
}

}  // namespace
}  // namespace droce::telemetry
