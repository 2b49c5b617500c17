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
                                 reference::logsumexp,
                                 reference::top_k,
                                 reference::ssru,
                                 reference::rms_norm,
                                 reference::rope,
                                 reference::multiply};
  return table;
}

}  // namespace petrel::kernels
