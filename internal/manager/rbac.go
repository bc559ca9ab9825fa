package manager

// Permissions every Deckhand manager needs, whatever controllers run. Each
// controller declares its own next to its Reconcile.

// The metrics endpoint asks the apiserver who a scraper is and whether it may
// read /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Events (events.k8s.io/v1) tell users in `kubectl describe` what Deckhand did.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
