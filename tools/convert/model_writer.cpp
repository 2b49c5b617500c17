#include "convert/model_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "convert/convert_error.h"
#include "core/file_io.h"
#include "format/crc32.h"
#include "format/model_file.h"
#include "petrel/model.h"

namespace petrel::convert {
namespace {

constexpr size_t kWriteBuffer = size_t{1} << 20;

// The signals on which partial outputs are removed (remove_partial_outputs_on_signals).
constexpr int kRemovalSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Holds kRemovalSignals back while it lives; one held is delivered when the scope ends.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t held;
    sigemptyset(&held);
    for (int signal_number : kRemovalSignals) sigaddset(&held, signal_number);
    ::pthread_sigmask(SIG_BLOCK, &held, &before_);
  }
  ~SignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t before_;
};

// Creates a new file beside `path`, `path`.<pid>-<n><suffix> (O_EXCL): never one that
// exists (a file of the user's that happens to have the name, or another conversion's to
// the same path, which would write into each other). Its name goes to `created`, then
// `on_created()` (which must not throw) registers or removes it with the signals held: one
// arriving in between would otherwise leave the file behind. Returns its descriptor;
// throws ConvertError naming `path` when no file can be created.
template <typename OnCreated>
int create_partial(const std::string& path, const char* suffix, mode_t mode, std::string& created,
                   OnCreated on_created) {
  static std::atomic<unsigned> counter{0};
  const SignalsHeld held;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::string name = path + "." + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix;
    const int fd = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0) {
      created = std::move(name);
      on_created();
      return fd;
    }
    if (errno != EEXIST) break;
  }
  throw ConvertError(path + ": cannot create output: " + std::strerror(errno));
}

// The partial outputs being written, for a signal handler to remove: fixed slots, as a
// handler may only read memory and call async-signal-safe functions such as unlink.
constexpr size_t kPartialSlots = 8, kMaxPartialPath = 4096;
struct PartialSlot {
  std::atomic<bool> taken{false}, named{false};
  char path[kMaxPartialPath];
};
PartialSlot partial_slots[kPartialSlots];
static_assert(std::atomic<bool>::is_always_lock_free, "read by a signal handler");

void remove_partials_and_die(int signal_number) {
  for (PartialSlot& s : partial_slots)
    if (s.named.load()) ::unlink(s.path);
  // SA_RESETHAND restored the default action: raised again, the signal ends the process
  // as it would have (pending until this handler returns).
  ::raise(signal_number);
}

}  // namespace

// 2 MiB folios: one core reads the weights 1.2-1.4x faster through 2 MiB pages than
// through the 4 KiB pages that copy_file_range and unaligned writes leave in the page cache
// (recent kernels keep large folios for ext4 and xfs files: measured with ext4 on Linux
// 6.18; bench/EXPERIMENTS.md, "Huge pages").
bool append_in_huge_page_chunks(int from, int to, uint64_t at, uint64_t size) {
  if (::lseek(from, 0, SEEK_SET) != 0) return false;
  constexpr uint64_t kChunk = uint64_t{2} << 20;
  std::vector<uint8_t> buffer(kChunk);
  while (size > 0) {
    const size_t chunk = static_cast<size_t>(std::min(size, kChunk - at % kChunk));
    // (a data file shorter than it should be: EIO)
    if (!detail::read_all(from, buffer.data(), chunk) || !detail::write_all(to, buffer.data(), chunk)) return false;
    at += chunk;
    size -= chunk;
  }
  return true;
}

PartialRegistration::PartialRegistration(const std::string& path) {
  if (path.size() >= kMaxPartialPath) return;
  for (PartialSlot& s : partial_slots) {
    bool free = false;
    if (!s.taken.compare_exchange_strong(free, true)) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.named.store(true);
    slot_ = &s;
    return;
  }
}

PartialRegistration::~PartialRegistration() {
  if (slot_ == nullptr) return;
  auto* s = static_cast<PartialSlot*>(slot_);
  s->named.store(false);
  s->taken.store(false);
}

void remove_partial_outputs_on_signals() {
  for (int signal_number : kRemovalSignals) {
    // An ignored signal stays ignored: `nohup petrel-convert ...`, or `... &` from a script,
    // must survive the hang-up or Ctrl-C it was started to survive.
    struct sigaction current = {};
    if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    struct sigaction action = {};
    action.sa_handler = remove_partials_and_die;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    ::sigaction(signal_number, &action, nullptr);
  }
}

ModelWriter::ModelWriter(const std::string& path) : path_(path) {
  builder_.ForceDefaults(true);
  std::string data_path;
  // The open descriptor keeps it; no file is left behind, whatever happens.
  data_fd_ = create_partial(path, ".data.partial", 0600, data_path, [&] { ::unlink(data_path.c_str()); });
}

ModelWriter::~ModelWriter() {
  if (data_fd_ >= 0) ::close(data_fd_);
}

void ModelWriter::put(const void* bytes, size_t size) {
  if (size == 0) return;
  crc_ = detail::crc32(static_cast<const uint8_t*>(bytes), size, crc_);
  data_size_ += size;
  if (buffer_.size() + size > kWriteBuffer) flush();
  if (size >= kWriteBuffer) {
    if (!detail::write_all(data_fd_, static_cast<const uint8_t*>(bytes), size))
      throw ConvertError(path_ + ": writing failed: " + std::strerror(errno));
    return;
  }
  const auto* p = static_cast<const uint8_t*>(bytes);
  buffer_.insert(buffer_.end(), p, p + size);
}

void ModelWriter::flush() {
  if (!detail::write_all(data_fd_, buffer_.data(), buffer_.size()))
    throw ConvertError(path_ + ": writing failed: " + std::strerror(errno));
  buffer_.clear();
}

void ModelWriter::pad_to_alignment() {
  static const uint8_t zeros[detail::kDataAlignment] = {};
  put(zeros, (detail::kDataAlignment - data_size_ % detail::kDataAlignment) % detail::kDataAlignment);
}

fb::DataRef ModelWriter::append(const void* bytes, size_t size) {
  pad_to_alignment();
  const uint64_t offset = data_size_;
  put(bytes, size);
  return fb::DataRef(offset, size);
}

void ModelWriter::begin_data() {
  pad_to_alignment();
  data_begin_ = data_size_;
}

void ModelWriter::write_data(const std::vector<uint8_t>& bytes) { put(bytes.data(), bytes.size()); }

int32_t ModelWriter::add(const std::string& name, const std::vector<uint64_t>& shape, const EncodedMatrix& m) {
  begin_data();
  write_data(m.data);
  return add_streamed(name, shape, m);
}

int32_t ModelWriter::add_streamed(const std::string& name, const std::vector<uint64_t>& shape,
                                  const EncodedMatrix& m) {
  const auto layout = m.layout == detail::Layout::kPanel16 ? fb::Layout::Panel16 : fb::Layout::RowMajor;
  PendingTensor t{name, static_cast<fb::DType>(m.dtype), shape, layout, fb::DataRef(data_begin_, data_size_ - data_begin_),
                  {}, {}, {}, static_cast<float>(m.max_abs_error), static_cast<float>(m.snr_db), m.activation_scale};
  if (!m.scales.empty()) t.scales = append(m.scales.data(), m.scales.size() * sizeof(float));
  if (!m.row_sums.empty()) t.row_sums = append(m.row_sums.data(), m.row_sums.size() * sizeof(int32_t));
  if (!m.block_scales.empty()) t.block_scales = append(m.block_scales.data(), m.block_scales.size());
  tensors_.push_back(std::move(t));
  return static_cast<int32_t>(tensors_.size() - 1);
}

int32_t ModelWriter::add_f32(const std::string& name, const std::vector<uint64_t>& shape,
                             const std::vector<float>& values) {
  tensors_.push_back({name, fb::DType::F32, shape, fb::Layout::RowMajor, append(values.data(), values.size() * 4), {},
                      {}, {}, NAN, NAN, 0.0f});
  return static_cast<int32_t>(tensors_.size() - 1);
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>> ModelWriter::tensor_table() {
  std::vector<flatbuffers::Offset<fb::Tensor>> offsets;
  for (const PendingTensor& t : tensors_) {
    auto name = builder_.CreateString(t.name);
    auto shape = builder_.CreateVector(t.shape);
    const fb::DataRef* scales = t.scales.size() ? &t.scales : nullptr;
    const fb::DataRef* row_sums = t.row_sums.size() ? &t.row_sums : nullptr;
    const fb::DataRef* block_scales = t.block_scales.size() ? &t.block_scales : nullptr;
    offsets.push_back(fb::CreateTensor(builder_, name, t.dtype, shape, t.layout, &t.data, scales, row_sums,
                                       block_scales, t.max_abs_error, t.snr_db, t.activation_scale));
  }
  return builder_.CreateVector(offsets);
}

uint64_t ModelWriter::write(flatbuffers::Offset<fb::Model> root) {
  flush();
  builder_.FinishSizePrefixed(root, fb::ModelIdentifier());
  const uint8_t* meta = builder_.GetBufferPointer();
  size_t meta_size = builder_.GetSize();  // includes the 4-byte prefix
  uint64_t data_start = detail::data_section_start(meta_size - 4);

  const std::string& path = path_;
  // The file in the making: closed and removed on every way out but the rename (a
  // failed write, the engine's refusal, an exception such as bad_alloc).
  struct Partial {
    std::string name;
    int fd = -1;
    std::optional<PartialRegistration> registered;  // outlives the removal below
    ~Partial() {
      if (fd >= 0) ::close(fd);
      if (!name.empty()) std::remove(name.c_str());
    }
  } partial;
  partial.fd = create_partial(path, ".partial", 0644, partial.name, [&] { partial.registered.emplace(partial.name); });
  static const uint8_t zeros[detail::kDataAlignment] = {};
  const size_t padding = data_start - meta_size;  // < kDataAlignment
  const bool wrote = detail::write_all(partial.fd, meta, meta_size) && detail::write_all(partial.fd, zeros, padding) &&
                     append_in_huge_page_chunks(data_fd_, partial.fd, data_start, data_size_);
  int error = wrote ? 0 : errno;
  if (::close(partial.fd) != 0 && error == 0) error = errno;
  partial.fd = -1;
  if (!wrote || error != 0) throw ConvertError(path + ": writing failed: " + std::strerror(error));
  // The engine's own loader has the last word: a file it would refuse is never written
  // (the converter's checks and the loader's limits cannot drift apart unnoticed).
  auto loaded = Model::load(partial.name);
  if (!loaded)
    throw ConvertError(path + ": not written: the engine would refuse the model (" + loaded.error().message + ")");
  if (std::rename(partial.name.c_str(), path.c_str()) != 0)
    throw ConvertError(path + ": writing failed: " + std::strerror(errno));
  partial.name.clear();  // it is the model now
  return data_start + data_size_;
}

}  // namespace petrel::convert
