package incident

// ReportingController is the name the recorder, its logs and its Events go
// by (reportingController), for the test that ties it to the PodBugger
// controller's.
const ReportingController = reportingController
