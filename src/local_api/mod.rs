//! The node's own Kubernetes API (issue 13), served by picolet itself so the real `kubectl`
//! works against a board with or without a cluster.
//!
//! Built so far: [`certs`], the serving certificate made on first start when no
//! `--tls-cert-file` is given (kubelet: a CA of its own and a server certificate it signs).
//! The server, the API handlers and the kubeconfig come next.

pub mod certs;
