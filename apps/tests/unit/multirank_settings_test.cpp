// wcomm multirank's start / ready exchange (apps/multirank/multirank_settings.h): ranks run
// Group's allreduce by default, and V0.1's ring only where a V0.1 rank takes part.
#include <gtest/gtest.h>

#include "multirank/multirank_settings.h"
#include "wcomm/errors.h"

namespace {

using wcomm::Dict;
using wcomm::ProtocolError;
using wcomm::Value;
using wcomm::tools::MultirankSettings;

const Value kV01Ready = Dict{{"op", "ready"}};

TEST(MultirankSettings, ByDefaultTheRanksRunGroupsAllreduce) {
  MultirankSettings s;
  EXPECT_EQ(s.algorithm, "auto");
  EXPECT_TRUE(s.v01_expressible());  // V0.1's xor on bytes, still
  // A wcomm responder learns the algorithm from the start message and names it in `ready`.
  MultirankSettings responder = MultirankSettings::from_value(s.to_value());
  EXPECT_EQ(responder.algorithm, "auto");
  EXPECT_EQ(responder.ready_message(), Value(Dict{{"op", "ready"}, {"algorithm", "auto"}}));
  EXPECT_FALSE(s.agree_with(responder.ready_message()));
  EXPECT_EQ(s.algorithm, "auto");
}

TEST(MultirankSettings, AV01InitiatorGetsV01sReadyExactly) {
  MultirankSettings v01;
  v01.algorithm = "v01";
  const MultirankSettings responder = MultirankSettings::from_value(v01.to_value());  // no wcomm keys sent
  EXPECT_EQ(responder.algorithm, "v01");
  EXPECT_EQ(responder.ready_message(), kV01Ready);
}

TEST(MultirankSettings, AV01ResponderTurnsTheInitiatorToV01sRing) {
  MultirankSettings s;  // auto, xor, uint8: what V0.1 computes
  EXPECT_TRUE(s.agree_with(kV01Ready));
  EXPECT_EQ(s.algorithm, "v01");
}

TEST(MultirankSettings, AV01ResponderCannotRunAnotherReduction) {
  MultirankSettings s;
  s.reduce = "sum";
  s.dtype = "float32";
  try {
    s.agree_with(kV01Ready);
    FAIL() << "a V0.1 responder was taken for a sum over float32";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("--reduce sum --dtype float32"), std::string::npos) << e.what();
  }
}

TEST(MultirankSettings, AReadyNamingAnotherAlgorithmIsRefused) {
  MultirankSettings s;
  EXPECT_THROW(s.agree_with(Value(Dict{{"op", "ready"}, {"algorithm", "ring"}})), ProtocolError);
  EXPECT_THROW(s.agree_with(Value(Dict{{"op", "go"}})), ProtocolError);
}

}  // namespace
