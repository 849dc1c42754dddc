package change

// ClusterPlan is what a change does to one CacheCluster.
type ClusterPlan struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Change is created, deleted or changed.
	Change string `json:"change"`
	// Rejected lists changes the API server refuses at admission.
	Rejected []string `json:"rejected,omitempty"`
	// Drift lists how the live spec differs from the base side, when the
	// live cluster was read: the plan then starts from the live spec.
	Drift []string `json:"drift,omitempty"`
	// Warnings are changes that will not be applied as written.
	Warnings []string `json:"warnings,omitempty"`
	// Operations are the day-two operations, in the order they run.
	Operations []PlannedOperation `json:"operations,omitempty"`
	// Objects are the rendered objects that change, with their diff.
	Objects []ObjectDiff `json:"objects,omitempty"`
}

// PlannedOperation is one day-two operation and its impact.
type PlannedOperation struct {
	Type        string   `json:"type"`
	Description string   `json:"description"`
	Restarts    []string `json:"restarts,omitempty"`
	Switchovers []string `json:"switchovers,omitempty"`
}

// ObjectDiff is one rendered object that changes.
type ObjectDiff struct {
	Object string `json:"object"`
	Diff   string `json:"diff"`
}
