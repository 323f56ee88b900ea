// A QP's multipath settings as users give them (src/options/multipath.cc).
#include "droce/options/multipath.h"

#include <gtest/gtest.h>

namespace droce::options {
namespace {

using transport::EntropyMode;
using transport::Recovery;

// The option an error names, or "" when there was none.
template <class F>
std::string error_option(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const ConfigError& e) {
    if (what) *what = e.what();
    return e.option();
  }
  return "";
}

TEST(OptionMultipath, TheScenarioNames) {
  EXPECT_EQ(parse_entropy_mode("--entropy", "fixed"), EntropyMode::kFixed);
  EXPECT_EQ(parse_entropy_mode("--entropy", "spray"), EntropyMode::kSpray);
  EXPECT_EQ(parse_entropy_mode("--entropy", "flowlet"), EntropyMode::kFlowlet);
  EXPECT_EQ(parse_entropy_mode("--entropy", "path_aware"), EntropyMode::kPathAware);
  EXPECT_EQ(parse_recovery("--recovery", "gbn"), Recovery::kGoBackN);
  EXPECT_EQ(parse_recovery("--recovery", "go_back_n"), Recovery::kGoBackN);
  EXPECT_EQ(parse_recovery("--recovery", "sr"), Recovery::kSelectiveRepeat);
  EXPECT_EQ(parse_recovery("--recovery", "selective_repeat"), Recovery::kSelectiveRepeat);
  // What recovery_name writes, parse_recovery reads back.
  for (Recovery r : {Recovery::kGoBackN, Recovery::kSelectiveRepeat})
    EXPECT_EQ(parse_recovery("x", recovery_name(r)), r);
  std::string what;
  EXPECT_EQ(error_option([] { parse_entropy_mode("--entropy", "ecmp"); }, &what), "--entropy");
  EXPECT_NE(what.find("fixed, spray, flowlet or path_aware"), std::string::npos) << what;
  EXPECT_EQ(error_option([] { parse_recovery("--recovery", "irn"); }, &what), "--recovery");
  EXPECT_NE(what.find("gbn"), std::string::npos) << what;
}

TEST(OptionMultipath, PathsAndToleranceRanges) {
  EXPECT_EQ(parse_entropy_paths("--entropy-paths", "1"), 1u);
  EXPECT_EQ(parse_entropy_paths("--entropy-paths", "16384"), transport::kMaxEntropyPaths);
  EXPECT_EQ(error_option([] { parse_entropy_paths("--entropy-paths", "0"); }), "--entropy-paths");
  EXPECT_EQ(error_option([] { parse_entropy_paths("--entropy-paths", "16385"); }),
            "--entropy-paths");
  EXPECT_EQ(error_option([] { parse_entropy_paths("--entropy-paths", "eight"); }),
            "--entropy-paths");
  EXPECT_EQ(parse_reorder_tolerance("--reorder-tolerance", "0"), 0u);
  EXPECT_EQ(parse_reorder_tolerance("--reorder-tolerance", "65536"), kMaxReorderTolerance);
  EXPECT_EQ(error_option([] { parse_reorder_tolerance("--reorder-tolerance", "65537"); }),
            "--reorder-tolerance");
}

TEST(OptionMultipath, NothingGivenKeepsTheQpDefaults) {
  const Multipath m = parse_multipath({}, MultipathNames::flags());
  EXPECT_FALSE(m.recovery);
  EXPECT_FALSE(m.reorder_tolerance);
  EXPECT_EQ(m.entropy.mode, EntropyMode::kFixed);
  transport::QpAttr a;
  a.sr_reorder_tolerance_pkts = 7;
  apply_multipath(m, a);
  EXPECT_EQ(a.recovery, Recovery::kGoBackN);
  EXPECT_EQ(a.entropy.mode, EntropyMode::kFixed);
  EXPECT_EQ(a.sr_reorder_tolerance_pkts, 7u);
  EXPECT_EQ(describe(m), "gbn");
}

TEST(OptionMultipath, SprayWithSelectiveRepeatSetsTheQp) {
  MultipathText t;
  t.recovery = "sr";
  t.entropy = "spray";
  t.entropy_paths = "8";
  t.reorder_tolerance = "64";
  const Multipath m = parse_multipath(t, MultipathNames::flags());
  transport::QpAttr a;
  apply_multipath(m, a);
  EXPECT_EQ(a.recovery, Recovery::kSelectiveRepeat);
  EXPECT_EQ(a.entropy.mode, EntropyMode::kSpray);
  EXPECT_EQ(a.entropy.paths, 8u);
  EXPECT_EQ(a.sr_reorder_tolerance_pkts, 64u);
  EXPECT_EQ(describe(m), "sr (reorder tolerance 64), spray over 8 ports");

  t.entropy = "flowlet";
  t.flowlet_gap = "4us";
  const Multipath f = parse_multipath(t, MultipathNames::flags());
  EXPECT_EQ(f.entropy.mode, EntropyMode::kFlowlet);
  EXPECT_EQ(f.entropy.flowlet_gap_ns, 4'000u);
  EXPECT_EQ(a.sr_reorder_window_ns, 0u);
  EXPECT_FALSE(a.write_reth_every_packet);
}

TEST(OptionMultipath, ReorderWindowAndRethEveryPacketSetTheQp) {
  MultipathText t;
  t.recovery = "sr";
  t.entropy = "path_aware";
  t.reorder_window = "20us";
  t.reth_every_packet = true;
  t.tail_probe = true;
  const Multipath m = parse_multipath(t, MultipathNames::flags());
  transport::QpAttr a;
  apply_multipath(m, a);
  EXPECT_EQ(a.entropy.mode, EntropyMode::kPathAware);
  EXPECT_EQ(a.sr_reorder_window_ns, 20'000u);
  EXPECT_TRUE(a.write_reth_every_packet);
  EXPECT_TRUE(a.sr_tail_probe);
  EXPECT_EQ(describe(m),
            "sr (reorder window 20000 ns) (tail loss probe), a RETH in every WRITE packet, "
            "path-aware spray over 64 ports");
  // The tail loss probe is RACK's: without a window it is refused by name.
  MultipathText p;
  p.recovery = "sr";
  p.tail_probe = true;
  std::string why;
  EXPECT_EQ(error_option([&] { parse_multipath(p, MultipathNames::flags()); }, &why),
            "--tail-probe");
  EXPECT_NE(why.find("needs --reorder-window"), std::string::npos) << why;
  // A window is selective repeat's; a time it cannot read is named.
  MultipathText g;
  g.reorder_window = "20us";
  std::string what;
  EXPECT_EQ(error_option([&] { parse_multipath(g, MultipathNames::flags()); }, &what),
            "--reorder-window");
  EXPECT_NE(what.find("needs --recovery sr"), std::string::npos) << what;
  g.recovery = "sr";
  g.reorder_window = "soon";
  EXPECT_EQ(error_option([&] { parse_multipath(g, MultipathNames::flags()); }),
            "--reorder-window");
  // A RETH in every packet is only the sender's segmentation: any recovery.
  MultipathText r;
  r.reth_every_packet = true;
  EXPECT_TRUE(parse_multipath(r, MultipathNames::flags()).reth_every_packet);
}

TEST(OptionMultipath, AnAdaptiveWindowNeedsAWindowAboveItsFloor) {
  MultipathText t;
  t.recovery = "sr";
  t.reorder_window = "20us";
  t.reorder_window_min = "2us";
  const Multipath m = parse_multipath(t, MultipathNames::flags());
  transport::QpAttr a;
  apply_multipath(m, a);
  EXPECT_EQ(a.sr_reorder_window_ns, 20'000u);
  EXPECT_EQ(a.sr_reorder_window_min_ns, 2'000u);
  EXPECT_EQ(describe(m), "sr (reorder window 20000 ns) (adapting from 2000 ns)");
  std::string why;
  t.reorder_window_min = "30us";
  EXPECT_EQ(error_option([&] { parse_multipath(t, MultipathNames::flags()); }, &why),
            "--reorder-window-min");
  EXPECT_NE(why.find("not within 1 ns..--reorder-window"), std::string::npos) << why;
  t.reorder_window_min = "0us";
  EXPECT_EQ(error_option([&] { parse_multipath(t, MultipathNames::flags()); }),
            "--reorder-window-min");
  t.reorder_window.reset();
  t.reorder_window_min = "2us";
  EXPECT_EQ(error_option([&] { parse_multipath(t, MultipathNames::keys("qp[1]")); }, &why),
            "qp[1].reorder_window_min");
  EXPECT_NE(why.find("needs one"), std::string::npos) << why;
}

TEST(OptionMultipath, CombinationsTheTransportRefusesNameTheOption) {
  std::string what;
  MultipathText t;
  t.entropy = "spray";
  EXPECT_EQ(error_option([&] { parse_multipath(t, MultipathNames::flags()); }, &what),
            "--entropy");
  EXPECT_NE(what.find("needs --recovery sr"), std::string::npos) << what;
  t.recovery = "gbn";
  EXPECT_EQ(error_option([&] { parse_multipath(t, MultipathNames::flags()); }), "--entropy");

  MultipathText tol;
  tol.reorder_tolerance = "64";
  EXPECT_EQ(error_option([&] { parse_multipath(tol, MultipathNames::flags()); }),
            "--reorder-tolerance");

  MultipathText paths;
  paths.recovery = "sr";
  paths.entropy_paths = "8";
  EXPECT_EQ(error_option([&] { parse_multipath(paths, MultipathNames::flags()); }, &what),
            "--entropy-paths");
  EXPECT_NE(what.find("--entropy spray, flowlet or path_aware"), std::string::npos) << what;

  MultipathText gap;
  gap.recovery = "sr";
  gap.entropy = "spray";
  gap.flowlet_gap = "4us";
  EXPECT_EQ(error_option([&] { parse_multipath(gap, MultipathNames::flags()); }),
            "--flowlet-gap");
}

TEST(OptionMultipath, RtoLowSetsTheQpAndIsSelectiveRepeats) {
  MultipathText t;
  t.recovery = "sr";
  t.rto_low = "5ms";
  const Multipath m = parse_multipath(t, MultipathNames::flags());
  transport::QpAttr a;
  const uint32_t threshold = a.sr_rto_low_threshold_pkts;
  apply_multipath(m, a);
  EXPECT_EQ(a.sr_rto_low_ns, 5'000'000u);
  EXPECT_EQ(a.sr_rto_low_threshold_pkts, threshold);  // only the time is an option
  EXPECT_EQ(describe(m), "sr (RTO_low 5000000 ns)");
  // Not given: the transport's default stays.
  transport::QpAttr d;
  apply_multipath(parse_multipath(MultipathText{}, MultipathNames::flags()), d);
  EXPECT_EQ(d.sr_rto_low_ns, transport::QpAttr{}.sr_rto_low_ns);
  // Go-back-N has one timeout; 0, more than 1 s and what is not a time are named.
  std::string what;
  MultipathText g;
  g.rto_low = "25us";
  EXPECT_EQ(error_option([&] { parse_multipath(g, MultipathNames::flags()); }, &what),
            "--rto-low");
  EXPECT_NE(what.find("needs --recovery sr"), std::string::npos) << what;
  for (const char* bad : {"0", "2s", "later"}) {
    t.rto_low = bad;
    EXPECT_EQ(error_option([&] { parse_multipath(t, MultipathNames::keys("qp[0]")); }),
              "qp[0].rto_low")
        << bad;
  }
}

TEST(OptionMultipath, ConfigKeysNameTheTableAndKey) {
  MultipathText t;
  t.entropy = "flowlet";
  std::string what;
  EXPECT_EQ(error_option([&] { parse_multipath(t, MultipathNames::keys("qp[2]")); }, &what),
            "qp[2].entropy");
  EXPECT_NE(what.find("needs qp[2].recovery sr"), std::string::npos) << what;
  EXPECT_EQ(MultipathNames::keys("").flowlet_gap, "flowlet_gap");
}

}  // namespace
}  // namespace droce::options
