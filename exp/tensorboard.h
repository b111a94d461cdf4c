// TensorBoard event files, written by hand from their open format (no TensorFlow): a
// TFRecord stream (length, masked CRC-32C of the length, data, masked CRC-32C of the
// data) of Event protocol buffers (tensorflow/core/util/event.proto): first a
// file_version event, then one Event per step with a Summary of scalar values
// (Summary.Value.tag and simple_value), as tf.summary.scalar writes them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace dl::exp::tensorboard {

// CRC-32C (Castagnoli), and TFRecord's masked form of it.
std::uint32_t crc32c(std::string_view data);
std::uint32_t masked_crc32c(std::string_view data);

// One TFRecord: the framing around `data`.
std::string record(std::string_view data);

// The serialized Event {wall_time, file_version: "brain.Event:2"}.
std::string file_version_event(double wall_time);

// The serialized Event {wall_time, step, summary {value {tag, simple_value}}...}.
std::string scalars_event(double wall_time, std::int64_t step,
                          const std::map<std::string, double>& values);

}  // namespace dl::exp::tensorboard
