//! The backend layer: which memory APIs exist on this machine and how to name a device.
//!
//! Every command shares this layer; a backend that is missing, slow or broken is reported with
//! its reason and never brings the tool down.

mod spec;

pub use spec::{BackendKind, DeviceSpec, ParseDeviceSpecError};
