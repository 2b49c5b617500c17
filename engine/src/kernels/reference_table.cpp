#include "kernels/kernels.h"

namespace petrel::kernels {

const KernelTable& reference_table() {
  static const KernelTable table{"scalar",
                                 reference::linear,
                                 reference::layer_norm,
                                 reference::activate,
                                 reference::add,
                                 reference::embed,
                                 reference::attend,
                                 reference::store_as,
                                 reference::attend_int8,
                                 reference::store_int8_kv,
                                 reference::logsumexp,
                                 reference::top_k,
                                 reference::ssru,
                                 reference::rms_norm,
                                 reference::rope,
                                 reference::multiply};
  return table;
}

}  // namespace petrel::kernels
