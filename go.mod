module github.com/toolgen/toolgen

go 1.26

require (
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/google/cel-go v0.31.0 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
