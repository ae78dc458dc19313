#!/usr/bin/env bash
# Builds the C/C++ libraries the wheel links statically, from Debian 12's source packages
# (apt-get source), with the manylinux_2_28 toolchain that scripts/build-wheels.sh made:
#   zlib, libpng, libjpeg-turbo, LMDB, xxHash, liburing, OpenSSL, libcurl (HTTP/HTTPS
#   only), oneTBB, and the header-only nlohmann-json and CLI11.
# Usage (from scripts/build-wheels.sh): deps.sh TOOLCHAIN_DIR SRC_DIR PREFIX
# TOOLCHAIN_DIR holds bin/cc, bin/c++, bin/ar, bin/ranlib and toolchain.cmake. Everything
# is installed under PREFIX (static libraries, headers, CMake and pkg-config files, and
# share/licenses/<library>/ with each library's licence files).
set -euo pipefail
tc=$1 src=$2 prefix=$3
jobs=$(nproc)
export CC=$tc/bin/cc CXX=$tc/bin/c++ AR=$tc/bin/ar RANLIB=$tc/bin/ranlib
export CFLAGS="-O2 -fPIC" CXXFLAGS="-O2 -fPIC"
export PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig PKG_CONFIG_PATH=
work=$prefix.work
rm -rf "$work" && mkdir -p "$work" "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/share/licenses"

cmake_lib() {  # cmake_lib NAME SOURCE_DIR [cmake arguments]: configure, build, install
  local name=$1 dir=$2; shift 2
  echo "wheel deps: $name"
  cmake -S "$dir" -B "$work/$name" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$tc/toolchain.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O2" -DCMAKE_CXX_FLAGS_RELEASE="-O2" \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON "$@" \
    > "$work/$name.log" 2>&1 || { tail -40 "$work/$name.log"; exit 1; }
  cmake --build "$work/$name" -j "$jobs" >> "$work/$name.log" 2>&1 || { tail -40 "$work/$name.log"; exit 1; }
  cmake --install "$work/$name" >> "$work/$name.log" 2>&1 || { tail -40 "$work/$name.log"; exit 1; }
}
licences() {
  local name=$1; shift
  mkdir -p "$prefix/share/licenses/$name"
  cp "$@" "$prefix/share/licenses/$name/"
}

# zlib (Debian's .dfsg source: the contrib/ folder removed)
echo "wheel deps: zlib"
cp -a "$src"/zlib-*/ "$work/zlib"
(cd "$work/zlib" && ./configure --static --prefix="$prefix" --libdir="$prefix/lib" &&
   make -j "$jobs" libz.a && make install) > "$work/zlib.log" 2>&1 || { tail -40 "$work/zlib.log"; exit 1; }
licences zlib "$src"/zlib-*/debian/copyright

cmake_lib libpng "$(echo "$src"/libpng1.6-*/)" -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF \
  -DPNG_EXECUTABLES=OFF -DZLIB_ROOT="$prefix" -DZLIB_USE_STATIC_LIBS=ON
licences libpng "$src"/libpng1.6-*/LICENSE

cmake_lib libjpeg-turbo "$(echo "$src"/libjpeg-turbo-*/)" -DENABLE_SHARED=OFF -DENABLE_STATIC=ON \
  -DWITH_TURBOJPEG=OFF -DWITH_SIMD=ON -DCMAKE_ASM_NASM_COMPILER=nasm \
  -DCMAKE_INSTALL_LIBDIR="$prefix/lib"  # its own GNUInstallDirs takes a relative "lib" from the cwd
licences libjpeg-turbo "$src"/libjpeg-turbo-*/LICENSE.md "$src"/libjpeg-turbo-*/README.ijg

# LMDB: two C files and a header
echo "wheel deps: lmdb"
lmdb=$(echo "$src"/lmdb-*/libraries/liblmdb)
(cd "$work" && $CC $CFLAGS -pthread -c "$lmdb/mdb.c" -o mdb.o && $CC $CFLAGS -pthread -c "$lmdb/midl.c" -o midl.o &&
   $AR rcs "$prefix/lib/liblmdb.a" mdb.o midl.o) > "$work/lmdb.log" 2>&1 || { cat "$work/lmdb.log"; exit 1; }
cp "$lmdb/lmdb.h" "$prefix/include/"
lmdb_version=$(basename "$(dirname "$(dirname "$lmdb")")"); lmdb_version=${lmdb_version#lmdb-}
printf 'prefix=%s\nName: lmdb\nDescription: LMDB\nVersion: %s\nLibs: -L${prefix}/lib -llmdb -pthread\nCflags: -I${prefix}/include\n' \
  "$prefix" "$lmdb_version" > "$prefix/lib/pkgconfig/lmdb.pc"
licences lmdb "$lmdb/LICENSE"

# xxHash: one C file and its headers
echo "wheel deps: xxhash"
xxh=$(echo "$src"/xxhash-*/)
(cd "$work" && $CC $CFLAGS -c "$xxh/xxhash.c" -o xxhash.o && $AR rcs "$prefix/lib/libxxhash.a" xxhash.o) \
  > "$work/xxhash.log" 2>&1 || { cat "$work/xxhash.log"; exit 1; }
cp "$xxh/xxhash.h" "$xxh/xxh3.h" "$prefix/include/"
xxh_version=$(basename "$xxh"); xxh_version=${xxh_version#xxhash-}
printf 'prefix=%s\nName: libxxhash\nDescription: xxHash\nVersion: %s\nLibs: -L${prefix}/lib -lxxhash\nCflags: -I${prefix}/include\n' \
  "$prefix" "$xxh_version" > "$prefix/lib/pkgconfig/libxxhash.pc"
licences xxhash "$xxh/LICENSE"

# liburing: its own configure; only the static library is installed
echo "wheel deps: liburing"
cp -a "$src"/liburing-*/ "$work/liburing"
(cd "$work/liburing" && ./configure --prefix="$prefix" --libdir="$prefix/lib" --cc="$CC" --cxx="$CXX" &&
   make -C src -j "$jobs" liburing.a ENABLE_SHARED=0 AR="$AR" RANLIB="$RANLIB" &&
   cp src/liburing.a "$prefix/lib/" && mkdir -p "$prefix/include/liburing" &&
   cp src/include/liburing.h "$prefix/include/" &&
   cp src/include/liburing/*.h "$prefix/include/liburing/") > "$work/liburing.log" 2>&1 ||
  { tail -40 "$work/liburing.log"; exit 1; }
uring_version=$(basename "$(echo "$src"/liburing-*/)"); uring_version=${uring_version#liburing-}
printf 'prefix=%s\nName: liburing\nDescription: io_uring\nVersion: %s\nLibs: -L${prefix}/lib -luring\nCflags: -I${prefix}/include\n' \
  "$prefix" "$uring_version" > "$prefix/lib/pkgconfig/liburing.pc"
licences liburing "$src"/liburing-*/LICENSE "$src"/liburing-*/COPYING

# OpenSSL: libssl and libcrypto only (build_libs, install_dev), no engines or modules to load.
echo "wheel deps: openssl"
cp -a "$src"/openssl-*/ "$work/openssl"
(cd "$work/openssl" && ./Configure linux-x86_64 no-shared no-tests no-engine no-module no-dso no-legacy \
   -fPIC --prefix="$prefix" --libdir=lib --openssldir=/etc/ssl &&
   make -j "$jobs" build_libs && make install_dev) > "$work/openssl.log" 2>&1 ||
  { tail -40 "$work/openssl.log"; exit 1; }
licences openssl "$src"/openssl-*/LICENSE.txt

# libcurl: HTTP and HTTPS only (HTTP_ONLY), TLS by OpenSSL, no compiled-in CA bundle: the
# library finds the system's at run time (lib/remote/http.cc).
cmake_lib curl "$(echo "$src"/curl-*/)" -DBUILD_CURL_EXE=OFF -DBUILD_TESTING=OFF -DHTTP_ONLY=ON \
  -DCURL_USE_OPENSSL=ON -DOPENSSL_ROOT_DIR="$prefix" -DOPENSSL_USE_STATIC_LIBS=ON \
  -DUSE_NGHTTP2=OFF -DCURL_USE_LIBSSH2=OFF \
  -DCURL_USE_LIBPSL=OFF -DUSE_LIBIDN2=OFF -DCURL_BROTLI=OFF -DCURL_ZSTD=OFF -DCURL_ZLIB=ON \
  -DCURL_DISABLE_LDAP=ON -DENABLE_THREADED_RESOLVER=ON -DCURL_CA_BUNDLE=none -DCURL_CA_PATH=none \
  -DCURL_CA_FALLBACK=OFF -DENABLE_MANUAL=OFF -DCURL_DISABLE_ALTSVC=ON -DCURL_DISABLE_HSTS=ON \
  -DZLIB_ROOT="$prefix"
licences curl "$src"/curl-*/COPYING

cmake_lib onetbb "$(echo "$src"/onetbb-*/)" -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF \
  -DTBBMALLOC_BUILD=OFF -DTBB_ENABLE_IPO=OFF
licences onetbb "$src"/onetbb-*/LICENSE.txt

cmake_lib nlohmann-json "$(echo "$src"/nlohmann-json3-*/)" -DJSON_BuildTests=OFF -DJSON_Install=ON
licences nlohmann-json "$src"/nlohmann-json3-*/LICENSE.MIT

cmake_lib cli11 "$(echo "$src"/cli11-*/)" -DCLI11_BUILD_TESTS=OFF -DCLI11_BUILD_EXAMPLES=OFF \
  -DCLI11_BUILD_DOCS=OFF -DCLI11_PRECOMPILED=OFF
licences cli11 "$src"/cli11-*/LICENSE

rm -rf "$work"
echo "wheel deps: done in $prefix"
