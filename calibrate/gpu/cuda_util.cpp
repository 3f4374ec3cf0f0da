// CUDA runtime helpers of the calibration binaries (see cuda_util.hpp).
#include "cuda_util.hpp"

#include <fmt/format.h>

#include "options.hpp"

namespace moesim::calibrate {

void check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  throw GpuError(fmt::format("{} failed: {} ({})", call, cudaGetErrorName(status), cudaGetErrorString(status)));
}

int require_devices() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    const std::string why = status != cudaSuccess
                                ? fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorName(status),
                                              cudaGetErrorString(status))
                                : std::string("cudaGetDeviceCount found 0 devices");
    throw GpuError(fmt::format("no CUDA device: {}; run on a machine with an NVIDIA GPU and driver, "
                               "or use --dry-run to list what would be measured",
                               why));
  }
  return count;
}

void select_device(int device, const char* option) {
  const int devices = require_devices();
  if (device >= devices) throw UsageError(fmt::format("{} {}: only {} CUDA device(s) visible", option, device, devices));
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  const cudaError_t status = cudaMalloc(&data_, bytes == 0 ? 1 : bytes);
  if (status != cudaSuccess) {
    data_ = nullptr;
    check_cuda(status, fmt::format("cudaMalloc({} bytes)", bytes).c_str());
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Stream::Stream() { check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}

void Stream::synchronize() const { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

EventTimer::EventTimer(int count) : start_(count, nullptr), stop_(count, nullptr) {
  for (int i = 0; i < count; ++i) {
    check_cuda(cudaEventCreate(&start_[i]), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_[i]), "cudaEventCreate");
  }
}

EventTimer::~EventTimer() {
  for (cudaEvent_t e : start_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : stop_)
    if (e) cudaEventDestroy(e);
}

void EventTimer::start(int i, cudaStream_t stream) { check_cuda(cudaEventRecord(start_.at(i), stream), "cudaEventRecord"); }

void EventTimer::stop(int i, cudaStream_t stream) { check_cuda(cudaEventRecord(stop_.at(i), stream), "cudaEventRecord"); }

std::vector<double> EventTimer::elapsed_us() const {
  std::vector<double> out;
  out.reserve(start_.size());
  for (std::size_t i = 0; i < start_.size(); ++i) out.push_back(span_us(static_cast<int>(i), static_cast<int>(i)));
  return out;
}

double EventTimer::span_us(int first, int last) const {
  check_cuda(cudaEventSynchronize(stop_.at(last)), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start_.at(first), stop_.at(last)), "cudaEventElapsedTime");
  return 1000.0 * ms;
}

}  // namespace moesim::calibrate
