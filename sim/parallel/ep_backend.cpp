#include "sim/parallel/ep_backend.hpp"

namespace moesim::parallel {

std::string_view to_string(EpBackendKind kind) { return name_of(kEpBackendNames, kind); }

int default_backend_sms(EpBackendKind kind) {
  switch (kind) {
    case EpBackendKind::Nccl: return 0;
    case EpBackendKind::DeepEp: return 20;    // deep_ep/buffer.py: Buffer.num_sms = 20
    case EpBackendKind::HybridEp: return 16;  // torchtitan's HybridEP integration, hard-coded (spec 001.A.7)
  }
  return 0;
}

}  // namespace moesim::parallel
