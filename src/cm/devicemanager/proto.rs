//! The generated device plugin API `v1beta1` (`proto/k8s.io/kubelet/pkg/apis/deviceplugin/
//! v1beta1/api.proto`): messages, the `DevicePlugin` client picolet calls plugins with, and
//! the servers — `Registration` (picolet's) and `DevicePlugin` (the tests' fake plugin).
//! Its types stay inside `cm::devicemanager`.
//! Its lint allows are `grpc::generated_module`'s (`cm::devicemanager` declares it).

include!(concat!(env!("OUT_DIR"), "/v1beta1.rs"));
