// Package kubernetes holds the Kubernetes manifests of the bookstore
// example and the test that keeps them in sync with the code: the
// ConfigMap is the output of `outbound env`, every variable is one the
// service declares, and the code defaults of the inventory and payments
// adapters are not overridden by the ConfigMap's baseline values. It has
// no Go API.
package kubernetes
