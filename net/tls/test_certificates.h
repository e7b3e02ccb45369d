// net/tls/test_certificates.h
//
// Certificates and Ed25519 keys for tests only (valid 2000-2100, so no
// clock in reach makes them expire). A test CA signed "server" (names
// localhost and 127.0.0.1) and "client"; "other" is self-signed for
// localhost, trusted by nobody. "sim" names the simulator's first nine
// node addresses (10.0.0.1 to 10.0.0.9), signed by the test CA. Ed25519 signatures are deterministic and of
// fixed size, so a handshake's byte counts do not depend on chance.
#pragma once

#include <string_view>

namespace brook::net::tls::testing {

inline constexpr std::string_view kCaCertificate = R"(-----BEGIN CERTIFICATE-----
MIIBIjCB1aADAgECAgEBMAUGAytlcDAYMRYwFAYDVQQDDA1Ccm9vayBUZXN0IENB
MCAXDTAwMDEwMTAwMDAwMFoYDzIxMDAwMTAxMDAwMDAwWjAYMRYwFAYDVQQDDA1C
cm9vayBUZXN0IENBMCowBQYDK2VwAyEAqhcts5D8MzhxN4FKHG7QLi8m9/rZ5zR+
mqen7diacZqjQjBAMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMB0G
A1UdDgQWBBSeN3jzFXUXrB3GkEt0gtDSL9LBhzAFBgMrZXADQQAaxyUj4IQIRVuk
Dy74Saj6f+gbWVWRpIpTEVc+u73aVZC92KpCGGoV/RQDYfV5h5l9jRV5CRpR5p3i
7jgiKrME
-----END CERTIFICATE-----
)";

inline constexpr std::string_view kServerCertificate = R"(-----BEGIN CERTIFICATE-----
MIIBRTCB+KADAgECAgECMAUGAytlcDAYMRYwFAYDVQQDDA1Ccm9vayBUZXN0IENB
MCAXDTAwMDEwMTAwMDAwMFoYDzIxMDAwMTAxMDAwMDAwWjAUMRIwEAYDVQQDDAls
b2NhbGhvc3QwKjAFBgMrZXADIQCGeZSZwFQ+y8op8b4ZOZJ8cERy9tfk6qkK3ohG
88B3ZaNpMGcwGgYDVR0RBBMwEYIJbG9jYWxob3N0hwR/AAABMAkGA1UdEwQCMAAw
HQYDVR0OBBYEFAekuPcHHoIhnQBSfLA/ScGwuLHQMB8GA1UdIwQYMBaAFJ43ePMV
dResHcaQS3SC0NIv0sGHMAUGAytlcANBADZiSmOFErqfr8j+FOm8OJKzb5P139BG
kxup3fCdJWzZlWqrRaY6q12h0E3ogc+xjupR9XZq/mcD/lUjbw5GSgQ=
-----END CERTIFICATE-----
)";

inline constexpr std::string_view kServerKey = R"(-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIHCFMgIMFuiD2ptJ7s+Kg+zVF6t/CX+uNNgTKbehYDb6
-----END PRIVATE KEY-----
)";

inline constexpr std::string_view kClientCertificate = R"(-----BEGIN CERTIFICATE-----
MIIBJjCB2aADAgECAgEDMAUGAytlcDAYMRYwFAYDVQQDDA1Ccm9vayBUZXN0IENB
MCAXDTAwMDEwMTAwMDAwMFoYDzIxMDAwMTAxMDAwMDAwWjARMQ8wDQYDVQQDDAZj
bGllbnQwKjAFBgMrZXADIQBPqs5ytLrG1VOwexjxfMLZDniJyNSm5z237rkq0b3A
2KNNMEswCQYDVR0TBAIwADAdBgNVHQ4EFgQUjD432FPHzEUWAOOWgycr9lMLPjYw
HwYDVR0jBBgwFoAUnjd48xV1F6wdxpBLdILQ0i/SwYcwBQYDK2VwA0EAJTBfbeea
NIIOijR9HBo2tT1+4BeroQ/qEOuPm9MZy7capnZv+sqYgCbAYExq+fZs32BESkeL
qjJx76vRZHidBA==
-----END CERTIFICATE-----
)";

inline constexpr std::string_view kClientKey = R"(-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEID7k15v3K65iSgW1eycxkNfz9DQCa72HRlKbApOCYVrS
-----END PRIVATE KEY-----
)";

inline constexpr std::string_view kOtherCertificate = R"(-----BEGIN CERTIFICATE-----
MIIBIzCB1qADAgECAgEEMAUGAytlcDAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwIBcN
MDAwMTAxMDAwMDAwWhgPMjEwMDAxMDEwMDAwMDBaMBQxEjAQBgNVBAMMCWxvY2Fs
aG9zdDAqMAUGAytlcAMhAAc42B7oCyZvgYBbvsf015OpYIGOSxVxnY/hNQ59TkYk
o0swSTAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwDAYDVR0TBAUwAwEB/zAd
BgNVHQ4EFgQUK28eeYf3vpXzZx8A7At29Z/dy5cwBQYDK2VwA0EA6od1TwAJkSiN
210D+5nSrCquzhynn+Yl/SZrvRuEm8CiqJicPg0nO3PBRMwhKGzs09+osyLT+uiX
7U/qpnJrAw==
-----END CERTIFICATE-----
)";

inline constexpr std::string_view kOtherKey = R"(-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIKr+VAA6XuJNQVGpwodFEjVTFrrfOwtTIthWMlbbTfFZ
-----END PRIVATE KEY-----
)";

inline constexpr std::string_view kSimCertificate = R"(-----BEGIN CERTIFICATE-----
MIIBbTCCAR+gAwIBAgIBBTAFBgMrZXAwGDEWMBQGA1UEAwwNQnJvb2sgVGVzdCBD
QTAgFw0wMDAxMDEwMDAwMDBaGA8yMTAwMDEwMTAwMDAwMFowFDESMBAGA1UEAwwJ
YnJvb2stc2ltMCowBQYDK2VwAyEAsj4R1LTa1kQiiHmZnrEzsR0TRwsVeI3se8e7
Bbz+WUajgY8wgYwwPwYDVR0RBDgwNocECgAAAYcECgAAAocECgAAA4cECgAABIcE
CgAABYcECgAABocECgAAB4cECgAACIcECgAACTAJBgNVHRMEAjAAMB0GA1UdDgQW
BBT/OXwJS+2fQSl8y2I32CcUHxB7TzAfBgNVHSMEGDAWgBSeN3jzFXUXrB3GkEt0
gtDSL9LBhzAFBgMrZXADQQDLxx2aiU3/FOmwBlgsXZiXe2Hleyb5gSGtK73JQx/1
Fq8nIDrPicAihTk3OpnFegUXVwQpUNJPB/8+Pw8ANHUP
-----END CERTIFICATE-----
)";

inline constexpr std::string_view kSimKey = R"(-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIIKcUQeP5aDTpDOH1Wtlrm9VpDD2nX8tgXNjZVh2yVg8
-----END PRIVATE KEY-----
)";

}  // namespace brook::net::tls::testing
