// CUDA runtime helpers of the calibration binaries: error checks that name the failing call,
// device selection with a clear message where there is no GPU, device buffers, and CUDA-event
// timing (one start/stop event pair per timed repetition, as the CUDA C++ Best Practices Guide
// §"Using CUDA GPU Timers" describes; resolution about 0.5 us).
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>
#include <vector>

namespace moesim::calibrate {

// A CUDA, cuBLAS or NCCL call failed, or no GPU can be used: exit code 1.
struct GpuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws GpuError "CALL failed: cudaErrorX (text)" unless `status` is cudaSuccess.
void check_cuda(cudaError_t status, const char* call);

// Number of visible CUDA devices; throws GpuError "no CUDA device ..." when there is none.
int require_devices();

// Makes `device` current after require_devices(); a device beyond the visible ones is a usage
// error naming `option`.
void select_device(int device, const char* option);

// Name of a device (cudaGetDeviceProperties).
std::string device_name(int device);

// Owns cudaMalloc'ed memory on the current device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking stream on the current device.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// `count` start/stop event pairs on the current device. Record start(i) and stop(i) around
// repetition i on a stream, then elapsed_us() synchronises and reads every pair.
class EventTimer {
 public:
  explicit EventTimer(int count);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start(int i, cudaStream_t stream);
  void stop(int i, cudaStream_t stream);
  std::vector<double> elapsed_us() const;  // one value per pair
  // Microseconds from start(first) to stop(last).
  double span_us(int first, int last) const;

 private:
  std::vector<cudaEvent_t> start_, stop_;
};

}  // namespace moesim::calibrate
