package v1

// ConditionBinaryAvailable tells whether the ObjectStore's release is in
// the upgrade server's store.
const ConditionBinaryAvailable = "BinaryAvailable"
