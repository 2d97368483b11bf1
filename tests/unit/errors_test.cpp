// Tests of ErrorCode names, throw_error's typed exceptions, and Result.
#include <gtest/gtest.h>

#include <string>

#include "wcomm/errors.h"

namespace wcomm {
namespace {

template <class E>
void expect_throws_as(ErrorCode code, const char* name) {
  EXPECT_STREQ(error_code_name(code), name);
  try {
    throw_error(Error{code, "what happened"});
  } catch (const E& e) {
    EXPECT_EQ(e.code(), code);
    EXPECT_STREQ(e.what(), "what happened");
    return;
  } catch (...) {
  }
  ADD_FAILURE() << name << " was not thrown as its typed exception";
}

TEST(Errors, EachCodeThrowsItsTypedException) {
  expect_throws_as<BackpressureError>(ErrorCode::kBackpressure, "BackpressureError");
  expect_throws_as<ConnectionClosedError>(ErrorCode::kConnectionClosed, "ConnectionClosedError");
  expect_throws_as<ConnectionFailedError>(ErrorCode::kConnectionFailed, "ConnectionFailedError");
  expect_throws_as<MessageTooLargeError>(ErrorCode::kMessageTooLarge, "MessageTooLargeError");
  expect_throws_as<OperationTimeoutError>(ErrorCode::kOperationTimeout, "OperationTimeoutError");
  expect_throws_as<ProtocolError>(ErrorCode::kProtocol, "ProtocolError");
  expect_throws_as<SerializationError>(ErrorCode::kSerialization, "SerializationError");
  expect_throws_as<UnknownCodecError>(ErrorCode::kUnknownCodec, "UnknownCodecError");
  expect_throws_as<UnsupportedPayloadError>(ErrorCode::kUnsupportedPayload, "UnsupportedPayloadError");
  expect_throws_as<CancelledError>(ErrorCode::kCancelled, "CancelledError");
  expect_throws_as<ClosedError>(ErrorCode::kClosed, "ClosedError");
  expect_throws_as<InvalidArgumentError>(ErrorCode::kInvalidArgument, "InvalidArgumentError");
}

TEST(Errors, ResultThrowsOnlyWhenEmpty) {
  Result<int> ok = 5;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.value(), 5);
  Result<int> bad = Error{ErrorCode::kProtocol, "bad"};
  EXPECT_FALSE(bad);
  EXPECT_THROW((void)bad.value(), ProtocolError);
  EXPECT_THROW((void)bad.value(), CommError);
}

}  // namespace
}  // namespace wcomm
