package v1beta1

// Hub marks v1beta1 as the version PodSets are converted through: every
// other version converts to and from it (controller-runtime's hub and
// spoke conversion), and it is the version stored.
func (*PodSet) Hub() {}
