module daskgo

go 1.26.8

require (
	github.com/kisielk/og-rek v1.3.0
	github.com/pierrec/lz4/v4 v4.1.33
)

require (
	github.com/aristanetworks/gomap v0.0.0-20230726210543-f4e41046dced // indirect
	github.com/kr/pretty v0.3.1 // indirect
	golang.org/x/exp v0.0.0-20230725093048-515e97ebf090 // indirect
	gopkg.in/check.v1 v1.0.0-20190902080502-41f04d3bba15 // indirect
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/rs/zerolog v1.35.1
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/sys v0.29.0 // indirect
)
