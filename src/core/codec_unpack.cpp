// Bounded msgpack unpacking for manifests: a structural pass that allocates nothing, then
// msgpack::unpack with limits, so a hostile length can never make the decoder allocate.
#include <algorithm>

#include "core/codec_internal.h"

namespace wcomm::codec_detail {

namespace {

// msgpack::unpack allocates every array and map up front from its declared element count.
// This pass walks the same bytes with msgpack's own parser and a visitor that allocates
// nothing, so by the time unpack runs, every declared element is known to be present in the
// document (total objects <= bytes) and the nesting is bounded.
class StructureCheck : public msgpack::null_visitor {
 public:
  StructureCheck(std::size_t max_depth, std::size_t max_elements)
      : max_depth_(max_depth), max_elements_(max_elements) {}

  bool start_array(std::uint32_t n) { return open(n); }
  bool end_array() { --depth_; return true; }
  bool start_map(std::uint32_t n) { return open(n); }
  bool end_map() { --depth_; return true; }
  bool visit_ext(const char*, std::uint32_t) {
    problem_ = Problem::kExt;
    return false;
  }
  void parse_error(std::size_t, std::size_t error_offset) {
    problem_ = Problem::kMalformed;
    offset_ = error_offset;
  }
  void insufficient_bytes(std::size_t, std::size_t) { problem_ = Problem::kTruncated; }

  enum class Problem { kNone, kExt, kMalformed, kTruncated, kTooDeep, kTooMany };
  Problem problem() const { return problem_; }
  std::size_t offset() const { return offset_; }
  std::size_t elements() const { return elements_; }

 private:
  bool open(std::uint32_t n) {
    if (++depth_ > max_depth_) {
      problem_ = Problem::kTooDeep;
      return false;
    }
    if (n > max_elements_) {
      problem_ = Problem::kTooMany;
      elements_ = n;
      return false;
    }
    return true;
  }
  std::size_t max_depth_, max_elements_;
  std::size_t depth_ = 0;
  std::size_t offset_ = 0;
  std::size_t elements_ = 0;
  Problem problem_ = Problem::kNone;
};

// Strings and binaries stay in the caller's bytes instead of being copied into the zone;
// the object handle never outlives the manifest span inside the decoder.
bool reference_everything(msgpack::type::object_type, std::size_t, void*) { return true; }

// Manifests up to this size unpack into the thread's reused zone; larger ones get their own
// (so a rare big manifest does not leave a big chunk behind in every thread).
constexpr std::size_t kSharedZoneDocumentBytes = 4096;

struct ThreadZone {
  msgpack::zone zone{8192};
  bool in_use = false;
};
thread_local ThreadZone thread_zone;

}  // namespace

UnpackedDocument::~UnpackedDocument() {
  if (own_) return;
  thread_zone.zone.clear();  // keeps its chunk for the next document
  thread_zone.in_use = false;
}

UnpackedDocument unpack_document(std::span<const std::uint8_t> bytes, std::size_t max_depth, std::size_t max_elements,
                                 const char* what) {
  const char* data = reinterpret_cast<const char*>(bytes.data());
  if (bytes.empty()) fail(ErrorCode::kProtocol, std::string(what) + " is empty");
  StructureCheck check(max_depth, max_elements);
  std::size_t off = 0;
  bool ok = msgpack::parse(data, bytes.size(), off, check);
  switch (check.problem()) {
    case StructureCheck::Problem::kNone: break;
    case StructureCheck::Problem::kExt:
      fail(ErrorCode::kProtocol, std::string(what) + " contains a msgpack ext value, which COMM v1 never uses");
    case StructureCheck::Problem::kMalformed:
      fail(ErrorCode::kProtocol, std::string(what) + " is not valid MessagePack (bad byte at offset " +
                                     std::to_string(check.offset()) + ")");
    case StructureCheck::Problem::kTruncated:
      fail(ErrorCode::kProtocol, std::string(what) + " is not valid MessagePack (it ends inside a value)");
    case StructureCheck::Problem::kTooDeep:
      fail(ErrorCode::kMessageTooLarge, std::string(what) + " nests deeper than the container depth limit allows");
    case StructureCheck::Problem::kTooMany:
      fail(ErrorCode::kMessageTooLarge, std::string(what) + " has a container of " +
                                            std::to_string(check.elements()) + " elements, more than the limit of " +
                                            std::to_string(max_elements));
  }
  if (!ok) fail(ErrorCode::kProtocol, std::string(what) + " is not valid MessagePack");
  if (off != bytes.size())
    fail(ErrorCode::kProtocol, std::string(what) + " has " + std::to_string(bytes.size() - off) +
                                   " trailing bytes after its MessagePack value");
  // The structural pass already enforced these; they are repeated so that unpack's own
  // allocations are bounded even if the two passes ever disagree.
  msgpack::unpack_limit limit(max_elements, max_elements, bytes.size(), bytes.size(), 0, max_depth + 1);
  try {
    if (bytes.size() <= kSharedZoneDocumentBytes && !thread_zone.in_use) {
      thread_zone.in_use = true;
      try {
        msgpack::object root = msgpack::unpack(thread_zone.zone, data, bytes.size(), reference_everything, nullptr, limit);
        return UnpackedDocument(root, nullptr);
      } catch (...) {
        thread_zone.zone.clear();
        thread_zone.in_use = false;
        throw;
      }
    }
    auto zone = std::make_unique<msgpack::zone>();
    msgpack::object root = msgpack::unpack(*zone, data, bytes.size(), reference_everything, nullptr, limit);
    return UnpackedDocument(root, std::move(zone));
  } catch (const msgpack::size_overflow& e) {
    fail(ErrorCode::kMessageTooLarge, std::string(what) + " exceeds a decoding limit (" + e.what() + ")");
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    fail(ErrorCode::kProtocol, std::string(what) + " is not valid MessagePack (" + e.what() + ")");
  }
}

}  // namespace wcomm::codec_detail
