// accuracy_error.h - the exception type of the accuracy subsystem. Every message names the
// file, dataset, argument or row at fault; the CLI prints it and exits with status 2.
#pragma once

#include <stdexcept>
#include <string>

namespace wideattn::accuracy {

class AccuracyError : public std::runtime_error {
public:
    explicit AccuracyError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace wideattn::accuracy
