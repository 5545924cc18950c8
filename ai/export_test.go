package ai

// SchemaCompiles exposes the compile counter to the external tests.
func SchemaCompiles() int64 { return schemaCompiles.Load() }
