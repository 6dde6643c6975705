#include "models/checkpointing.hpp"

namespace zt {

bool ActivationCheckpointing::checkpoints(int layer) const {
  switch (mode) {
    case Mode::none: return false;
    case Mode::selective_block: return (layer + 1) % every == 0;
    case Mode::full:
    case Mode::selective_op: return true;
  }
  return false;
}

std::string ActivationCheckpointing::describe() const {
  std::string s;
  switch (mode) {
    case Mode::none: return "none";
    case Mode::full: s = "full"; break;
    case Mode::selective_op: s = "selective op"; break;
    case Mode::selective_block: {
      const int r = every % 100;
      const char* th = (r / 10 == 1 || r % 10 > 3 || r % 10 == 0) ? "th" : r % 10 == 1 ? "st" : r % 10 == 2 ? "nd" : "rd";
      s = every == 1 ? "selective every block" : "selective every " + std::to_string(every) + th + " block";
      break;
    }
  }
  return cpu_checkpointing ? s + ", inputs in host memory" : s;
}

}  // namespace zt
