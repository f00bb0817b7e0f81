// The process-wide list of verbs devices (facts 1.3 steps 4-6).
//
// Every get_device_list() rescans: devices that vanished drop out of the
// list (and are freed once nobody holds them), new ones are matched to a
// provider, unchanged ones keep their verbs_device. Each verbs_device is
// reference counted: the list holds one reference, every array returned to
// the application one more, every open context one more.
#pragma once

#include <infiniband/driver.h>

#include <string>
#include <vector>

namespace ov::core {

// Rescans and returns the current devices, each already held once for the
// caller (release with device_put). 0, or a positive errno (ENOMEM).
int get_device_list(std::vector<ibv_device *> &out);

void device_hold(ibv_device *dev) noexcept;
void device_put(ibv_device *dev) noexcept;

// Reasons collected during the last scan (skipped devices and providers),
// for diagnostics and tests.
std::vector<std::string> last_scan_notes();

// Test seam: drops the cached devices (putting the list's references) and
// the configuration so that the next scan starts from scratch.
void reset_device_list_for_tests();

} // namespace ov::core
