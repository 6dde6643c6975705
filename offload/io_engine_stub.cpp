// The engine in a build without liburing: PinnedBuffer and IoFile still work (they are built from
// their own files); IoEngine cannot be made, and says why.
#include "offload/io_engine.hpp"

namespace zt {

struct IoEngine::Impl {};

IoEngine::IoEngine(const AioConfig& cfg) : cfg_(cfg) {
  throw IoError("this build has no io_uring engine (liburing was not found at configure time)");
}

IoEngine::~IoEngine() = default;

void IoEngine::register_buffer(const PinnedBuffer&) {}

IoTransferPtr IoEngine::read(const IoFile&, void*, size_t, uint64_t) { return nullptr; }

IoTransferPtr IoEngine::write(const IoFile&, const void*, size_t, uint64_t) { return nullptr; }

bool io_engine_available() { return false; }

}  // namespace zt
