//! The node's own Kubernetes API (issue 13), served by picolet itself so the real `kubectl`
//! works against a board with or without a cluster.
//!
//! Built so far: [`certs`], the serving certificate made on first start when no
//! `--tls-cert-file` is given (kubelet: a CA of its own and a server certificate it signs),
//! [`credentials`], the bearer token and the kubeconfig written for it, and [`logs`], the
//! reader behind `pods/log` (`kubectl logs`). The server and the API handlers come next.

pub mod certs;
pub mod credentials;
pub mod logs;
