#include "image/resize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace shardpack::image {
namespace {

constexpr Filter kAllFilters[] = {Filter::kArea, Filter::kBilinear, Filter::kBicubic,
                                  Filter::kLanczos3};

Image MakeImage(int height, int width, int channels, uint8_t value = 0) {
  Image img;
  img.height = height;
  img.width = width;
  img.channels = channels;
  img.pixels.assign(static_cast<size_t>(height) * width * channels, value);
  return img;
}

// The 16x12 source of the Pillow fixtures; gen_fixtures.py computes the same formula.
Image PillowSource(int channels) {
  Image img = MakeImage(12, 16, channels);
  uint8_t* p = img.pixels.data();
  for (int y = 0; y < 12; ++y) {
    for (int x = 0; x < 16; ++x) {
      for (int c = 0; c < channels; ++c) {
        *p++ = static_cast<uint8_t>(x * 19 + y * 31 + c * 80 + ((x * y) & 7) * 23);
      }
    }
  }
  return img;
}

// Deterministic noise (a 32-bit LCG), to exercise every sample value.
Image NoiseImage(int height, int width, int channels, uint32_t seed) {
  Image img = MakeImage(height, width, channels);
  for (uint8_t& v : img.pixels) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(seed >> 24);
  }
  return img;
}

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

int MaxAbsDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(int{a[i]} - int{b[i]}));
  }
  return worst;
}

struct PillowCase {
  Fit fit;  // kStretch: Image.resize(size, filter); kCrop: ImageOps.fit(image, size, filter)
  Filter filter;
  int out_height;
  int out_width;
  int channels;
  const char* hex;  // expected HWC bytes
};

// Expected bytes from Pillow 13.0.0 on PillowSource(channels), made with:
//
//   from PIL import Image, ImageOps
//   R = Image.Resampling
//   def pattern(ch):
//       return bytes((x * 19 + y * 31 + c * 80 + ((x * y) & 7) * 23) & 255
//                    for y in range(12) for x in range(16) for c in range(ch))
//   rgb = Image.frombytes("RGB", (16, 12), pattern(3))
//   gray = Image.frombytes("L", (16, 12), pattern(1))
//   rgb.resize((out_width, out_height), R.BOX).tobytes().hex()             # Fit::kStretch
//   ImageOps.fit(rgb, (out_width, out_height), R.BICUBIC).tobytes().hex()  # Fit::kCrop
//
// (BOX, BILINEAR, BICUBIC, LANCZOS are kArea, kBilinear, kBicubic, kLanczos3.) The cases
// cover downscaling (7x5), upscaling (30x23), one axis each way (20x5), one axis only
// (7x12, 16x5), gray, and fractional crop boxes.
const PillowCase kPillowCases[] = {
    {Fit::kStretch, Filter::kArea, 5, 7, 3,
     "1f6fbf6b918b788898879767966676a272976e3e8e89847f647b768f5faf7b75c55baba588a061c191617484"
     "94577da275c55556a676c1516186817b5565b57670966ea2647399697bcb456a658a6f699d496e946cbc8ca5"
     "756f8555a59464b451a1b1769c96bb8b5b"},
    {Fit::kStretch, Filter::kBilinear, 5, 7, 3,
     "3d7fa16b8d837f769880847d806b8c887e928f6074817a826885797c71ab7f76b16fa49687a369bb86648986"
     "85618f836ba7686d9d6d826b7f7984795c75a26e788d62997e739c7079b84f7967827967984d6f95619889a3"
     "84668a62987b72a9648e9d6da293b0916a"},
    {Fit::kStretch, Filter::kBicubic, 5, 7, 3,
     "337ea66e8e807c779a81887783658e8a80948c5d75887d7f6781718067b1806dbf65b19885ab60cb875c8e86"
     "845b8c8e69b1606ca2678b607d7a84775673aa6f748d5fa07a729c6b78c641775d8777619e436e975a9c8fab"
     "815e8d5b9e7d6db362929d6daa93bc9164"},
    {Fit::kStretch, Filter::kLanczos3, 5, 7, 3,
     "2e7ca8738e7f787a9b818c72895e92858196895e748a817f6b7c697e65ba8263c760b49981b65dd984559689"
     "7e538c9b69b95770a9608a5c7f7b83725071b16d718d5ea37a71986678cd3b79568c7160a33d7298539c93b3"
     "7e588b5aa97b68b96591986cb292c68f61"},
    {Fit::kStretch, Filter::kArea, 23, 30, 3,
     "0050a00050a01363b31363b32676c62676c63989d94c9cec4c9cec5fafff5fafff72c21272c21285d52585d5"
     "2598e83898e838abfb4babfb4bbe0e5ebe0e5ed12171e43484e43484f74797f747970a5aaa0a5aaa1d6dbd1d"
     "6dbd0050a00050a01363b31363b32676c62676c63989d94c9cec4c9cec5fafff5fafff72c21272c21285d525"
     "85d52598e83898e838abfb4babfb4bbe0e5ebe0e5ed12171e43484e43484f74797f747970a5aaa0a5aaa1d6d"
     "bd1d6dbd1f6fbf1f6fbf4999e94999e973c31373c3139ded3dc71767c71767f14191f141911b6bbb1b6bbb45"
     "95e54595e5b70757b70757e13181e131810b5bab0b5bab3585d55fafff5fafff89d92989d929b30353b30353"
     "dd2d7ddd2d7d1f6fbf1f6fbf4999e94999e973c31373c3139ded3dc71767c71767f14191f141911b6bbb1b6b"
     "bb4595e54595e5b70757b70757e13181e131810b5bab0b5bab3585d55fafff5fafff89d92989d929b30353b3"
     "0353dd2d7ddd2d7d3e8ede3e8ede7fcf1f7fcf1fc01060c010600151a18ada2a8ada2acb1b6bcb1b6b0c5cac"
     "0c5cac4d9ded4d9dedd62676d626761767b71767b758a8f858a8f899e9392272c22272c263b30363b303a4f4"
     "44a4f444e53585e535853e8ede3e8ede7fcf1f7fcf1fc01060c010600151a18ada2a8ada2acb1b6bcb1b6b0c"
     "5cac0c5cac4d9ded4d9dedd62676d626761767b71767b758a8f858a8f899e9392272c22272c263b30363b303"
     "a4f444a4f444e53585e535855dadfd5dadfdb50555b505550d5dad0d5dadadfd4d0555a50555a55dadfd5dad"
     "fdfd4d9dfd4d9d55a5f555a5f5f54595f545954d9ded4d9deda5f545a5f5454595e59ded3d9ded3df54595f5"
     "459595e53595e535ed3d8ded3d8d5dadfd5dadfdb50555b505550d5dad0d5dadadfd4d0555a50555a55dadfd"
     "5dadfdfd4d9dfd4d9d55a5f555a5f5f54595f545954d9ded4d9deda5f545a5f5454595e59ded3d9ded3df545"
     "95f5459595e53595e535ed3d8ded3d8d7ccc1c7ccc1ceb3b8beb3b8ba2f242a2f2421161b1c81868c8186837"
     "87d73787d7ee3e8eee3e8e5dadfd5dadfd1464b41464b483d32383d3233a8ada3a8adaa9f94960b00060b000"
     "cf1f6fcf1f6f86d62686d626f54595f545957ccc1c7ccc1ceb3b8beb3b8ba2f242a2f2421161b1c81868c818"
     "683787d73787d7ee3e8eee3e8e5dadfd5dadfd1464b41464b483d32383d3233a8ada3a8adaa9f94960b00060"
     "b000cf1f6fcf1f6f86d62686d626f54595f545959beb3b9beb3b2171c12171c1ef3f8fef3f8f75c5154393e3"
     "4393e31161b11161b197e73797e73765b50565b5053383d33383d3b90959b9095987d72787d7270d5daddb2b"
     "7bdb2b7ba9f949a9f9492f7fcf2f7fcffd4d9dfd4d9dba0a5aba0a5a57a7f757a7f73c8cdc3c8cdc2171c106"
     "56a60656a6a3f343a3f34388d82888d8286dbd0d6dbd0d52a2f252a2f2ef3f8fef3f8fd42474d42474b90959"
     "9eee3e9eee3e3b8bdb3b8bdb2070c02070c00555a50555a5ba0a5aba0a5a57a7f757a7f73c8cdc3c8cdc2171"
     "c10656a60656a6a3f343a3f34388d82888d8286dbd0d6dbd0d52a2f252a2f2ef3f8fef3f8fd42474d42474b9"
     "09599eee3e9eee3e3b8bdb3b8bdb2070c02070c00555a50555a5d92979d929798ddd2d8ddd2d89d92989d929"
     "85d52581d12181d1217dcd1d7dcd1d79c91979c91975c51575c51571c11171c1112575c52575c52171c12171"
     "c11d6dbd1969b91969b91565b51565b51161b11161b10d5dad0d5dadd92979d929798ddd2d8ddd2d89d92989"
     "d92985d52581d12181d1217dcd1d7dcd1d79c91979c91975c51575c51571c11171c1112575c52575c52171c1"
     "2171c11d6dbd1969b91969b91565b51565b51161b11161b10d5dad0d5dadf84898f848980b5bab0b5bab1e6e"
     "be1e6ebe3181d14494e44494e457a7f757a7f76aba0a6aba0a7dcd1d7dcd1d90e03090e030a3f343a3f343b6"
     "0656b60656c91969dc2c7cdc2c7cef3f8fef3f8f0252a20252a21565b51565b5f84898f848980b5bab0b5bab"
     "1e6ebe1e6ebe3181d14494e44494e457a7f757a7f76aba0a6aba0a7dcd1d7dcd1d90e03090e030a3f343a3f3"
     "43b60656b60656c91969dc2c7cdc2c7cef3f8fef3f8f0252a20252a21565b51565b51767b71767b74191e141"
     "91e16bbb0b6bbb0b95e535bf0f5fbf0f5fe93989e939891363b31363b33d8ddd3d8dddafff4fafff4fd92979"
     "d929790353a30353a32d7dcd57a7f757a7f781d12181d121abfb4babfb4bd52575d525751767b71767b74191"
     "e14191e16bbb0b6bbb0b95e535bf0f5fbf0f5fe93989e939891363b31363b33d8ddd3d8dddafff4fafff4fd9"
     "2979d929790353a30353a32d7dcd57a7f757a7f781d12181d121abfb4babfb4bd52575d525753686d63686d6"
     "77c71777c717b80858b80858f9499982d22282d222c31363c313630454a40454a44595e54595e5ce1e6ece1e"
     "6e0f5faf0f5faf50a0f050a0f091e1311a6aba1a6aba5babfb5babfb9cec3c9cec3cdd2d7ddd2d7d3686d636"
     "86d677c71777c717b80858b80858f9499982d22282d222c31363c313630454a40454a44595e54595e5ce1e6e"
     "ce1e6e0f5faf0f5faf50a0f050a0f091e1311a6aba1a6aba5babfb5babfb9cec3c9cec3cdd2d7ddd2d7d55a5"
     "f555a5f5adfd4dadfd4d0555a50555a5a5f545fd4d9dfd4d9d55a5f555a5f5f54595f545954d9ded4d9deded"
     "3d8ded3d8d4595e54595e59ded3d9ded3d3d8ddd95e53595e535ed3d8ded3d8d8ddd2d8ddd2de53585e53585"
     "55a5f555a5f5adfd4dadfd4d0555a50555a5a5f545fd4d9dfd4d9d55a5f555a5f5f54595f545954d9ded4d9d"
     "eded3d8ded3d8d4595e54595e59ded3d9ded3d3d8ddd95e53595e535ed3d8ded3d8d8ddd2d8ddd2de53585e5"
     "3585"},
    {Fit::kStretch, Filter::kBilinear, 23, 30, 3,
     "0050a00656a61060b01a6aba2474c42e7ece3888d84393e34d9ded57a7f761b1e76bbb6975c5157fcf1f89d9"
     "2994e4349eee3ea8f848b2a452bc265cc61666d02070db2b7be53585ef3f8fdf49996153a30d5dad1767b71d"
     "6dbd0959a91161b11e6ebe2c7cb139899847979e54a4ac628eba7077c77d85d58492d06aa07c5eae466bbb53"
     "7dbc5596af47a9b049b6be56a98864903471962f7fa43c8cb24a9abf58a6cd658cc86c7a7452883e46964b53"
     "a3535bab1969b92575c53888d84c9ca160b04774c44688d85b9c856eb03282c44696c45aa5696f9f3282a046"
     "96b46888a69a4d6bbd3f5dd052709954843f4d983e5cac5370c06684d47a98e18eac889dac42975157981a6a"
     "ac2e7eb73a8a2979c93888bf52a2ad6d9e7a878c387d9e416bb95c8f8959b45554cf446fd039896154a41e6e"
     "be3989d96478c8a43080b72070a53a8a7255a5306fbf3989b554a4a351a1c74c9ce467b77681c0219c7e3cb6"
     "4c56d13971e030803989d94b9bab6cbc588d8e46af3b5271466f1e679056936395b735b66456bd2676564898"
     "1969b93a8ada6b7fcfb23e8ea333835054a43e75c54a97e767b7a988d8565bab8e2d7dc54e9e5d6ebb0e90c7"
     "30b1b551d26272e434844999e95f93b38688518b644e80357563587f438d824d9d6d5ba65a8377819c51a17b"
     "54a46263b3568ada7286d6c04b9bab4797496ebe4696c36dbdb877c79b7aca7b65b585529f8e79945f999439"
     "9cca3cabd04bd26e72e838885aaafa737fc7a1336c7a306e2f4f9c55958296e65957a77716659b4484c87595"
     "e5b66bbbcb5dad7f8bdb798dddcd58a8bf5bab6489d966b6b294e4677aca8d51a1ce6fbf8f93da4dc08f6cdd"
     "607db3af53a5ca45d36f73ec3c8c6abaa0878b90bb36749c4a73578e7e59a97c6cbc76617c81553f8f5173c3"
     "5e95e5b866b6dc57a7878bdb6794e48966b6886f9f6ca39b6bbb9176c68574c4916ebea479c96487ce27bb7a"
     "5bdd467daea04e9fc43fd36f73f040907aca2b9b9f46d55078ca7870a0d74f62b2732070a76c448cb7207072"
     "5aaa4b82d2ad5babd752a2888cdc4f9beb3073c33e838b70bd4668b86b4797c16bbb9a9fef5884d42c68af08"
     "a26142ca336aa395439abf3ad47074f444948ada2a8bb24e8e6a8fa3708dbf996b8b99674390696570858851"
     "a15266b63578bc8b8389b6926d7fa68152a2983181b546739a877652858b5863a7815faf8161b1787d935899"
     "7439ae7c4eb48760819e6b789e7aca678ef949999aea3a77c5623984aa6f60aed94792b87a5b77bf1c5caa7c"
     "448ede2976c61f6ea668b46691dc3174c31859a9393e8ea45a5fada2216ca657488ac12f53a3621464a77447"
     "92d63576be9f5e9ee9565eab9c5379c4bf5cabfd4d9dab7b4b8980764f89c45d7ece8d6aba757d954e9a6e38"
     "88982676c243939b5faf737ccc4b89d92975c51560b03c4c9cb06e71c1bc3787c64566b275528d5d65663682"
     "906070ba8f5e93ab7b6bbb974393b43671c1665dad8151a1bb0b5b9d3a88698ed94e9ee94191db3282cc2474"
     "bf1666b10e5ea060b06c9fef3f91e13183d32375c51567b74159a9b98085d1d151a0e13686d32979c41a6ab7"
     "0c5ca97c4e98e84664b4983787d72979c91b6bbb0d5dad0555a5cb1b6bb14e7483a8846fbf8467b77c5faf74"
     "58a86d50a0654b9b5c70c0438ddd2d85d5257dcd1d76c6166ebe2966b6606c99877c6ba47c57a7744f9f6c47"
     "976540905d738854a4833b8ba82575c51d6dbd1565b50e5eae0959a9db2b7bc15e6693b84184d43582d23381"
     "d1317fcf307ece2f7dcd2e7ccc2d7bcb2a78c81f77c71776c61675c51574c4145eae463989a02d77bc2b6cba"
     "2969b92867b72766b62665b52564b42263b31760b00f5faf0e5eae0e5eaeeb3b8bb855855e837b44947b4999"
     "7f4e9e8453a38959a98f5eae9463b39968b88f6dbd4472c21277c7177ccc1c81d1217dcd3d73c36b738b7c77"
     "40817c3686813b8b8741918c4696914b9b8750a03c55a50a5aaa0f5faf1262b2e04b9ba252a2345dad1969af"
     "2474ab2f7fb43b8bbf4789cb5287d75e92e2669dd663a96864b4206fbf2b7dcd328ddd339ae23aa5de45a791"
     "51a3235cac1767b72373c32f7fcf3a8ada4686ce5185605d9118639c2360a72a5eae6a5cac5866b63778c839"
     "899e4b9b5a5dad5b6fbf6e818080934191a553a3a765ab62778b39897a4a9a8c67b78391e157aecd4ec08960"
     "965d71523d835345956657a77869b9897bc59b8d81a39e4d83b05f72a7718463828e3d8d1c6cbc2a7abe4292"
     "c15a9b84729f288ab32aa3cc43ad7d4db72d57d03170cf38885d50a01868b83080d05aa1be98ca74b6a962b9"
     "4e7a7c4292205aaa2272b13b8bb54595d24f9fe868b88d80d04398e847b0d550c86568d626762c7ccc3d8daa"
     "5cac6c7a8b509a4e42b85b58d77a77b78757988f38b75157bc25755244941363b33181d16188c5a67182a25f"
     "756452944862b23a82d250a0a56fbf684f9f993080cd4f9fbf6dbda88cdc6babd04bc96669da2a7a3c8cdc50"
     "a0a476c641898d3b932a60b93b75e66888c292629bb43ca56b62a13282604595375dad4182d2687cccb33f8f"
     "9c3888395eae3383c158a8cb6dbd9880d0575aaa7a3483a25a8dc87a9dd48dca78a5ca45ca666adf2f7f4c9c"
     "ec64b4b890e05b78ad5b425187717979b9c05ecc9c6cd6737da178a97a76c69a5caca057a76983d36e83d3c1"
     "4c9cb04c9c5378c853a3b07fcf7a71c18a56a6aa64b48475be5da18989be69a0a4b05e9fc43fcb676be33383"
     "55a5f56fbfc39eee696fbf6d16669c4a9a7ba0f048d1a171f750a09e7fcf659bebba68b8d954a47f83d37287"
     "d7c853a3bb57a76186d665b5a794e44e73c3824090d869b98998df38c78667e34d83b0a2509cc13ccb676be5"
     "3585"},
    {Fit::kStretch, Filter::kBicubic, 23, 30, 3,
     "004c9c0151a00b5ba91565bc1e6ed22775de2f7fe53994ef42a9f84ab2ff56baf96cc35b7dcc0086d4058de1"
     "1b93f52f9aff3ca2ff44b4b54dca1756d6005fdd1767e72170f02a7bff3290f13ea35354ac0066b50070bf0e"
     "74c40554a30b5bae1968c22678b832899e429aa152a3b25f8ec26a79d17a87e47f9add6aa7725fb3316cc245"
     "7ec44d96b840aac042bcce51b0925e96276a99197aaa348aba439bc952a1e2638dd567806a4d8c2a439c3c56"
     "aa4a62b11564b32070ca3685f1499fae5ebd3678df2a96e94ea88268b91e81db3297d259a6656da12382a638"
     "9fc5628bb29b3d64cb2a50eb476da64d812e49962256b0466ece6087ed79a1ed90c5879eb93899414c9e0169"
     "b4257fc13c8a2574cb3388c751aebd73ab7993932086aa2671c350958b4dc64747f52c5fe72a7f5549a9006c"
     "d02292f65e79dcad177ac90061b625887148ab186ecb1e91be48aca945a7df3fa3f957cf7377d60ba17b28c6"
     "3952e32c70f2297f3483e846a1b06bd5469d9b2dc5294c7326780a579a42a2629cca28d36241cb136d453995"
     "006bbd2797e96d87dac53385af23763e50a22573d54496fd70c5ab92e5425aac8b2072d039975865c4008de0"
     "20b4c752d95c76ea2588449bff5c9abe8a9436965f3287197d613b8f3784883ab16952bd52877d79a4479f7a"
     "48a05661b14695e5718fdfde4392be3a902e6ccc2a9cd675c8c087d69780d06f61b6834a989271875c979530"
     "98e831a9ed49d66c76ee278e53b6ff7383d6ad22607b14641845aa4fa288a7f64f5ab36c0561a12c87db74a1"
     "f2ce68b9e055a57492e26d96e5e6509fd74ea95886ef5cc1bba2f35180d0854797df64c39999e548d3886eea"
     "5389b1ba509dda3dd56a75f32e9361c8a2898b97d31772a72f703f9a8449c77f77c97668757c4e2d923b76d6"
     "55a8f8d760b8ff45a3888fed5a9dfa915db793689b6ab1a068cd917ccd7c77c5976ebdb174dd5e8ae115ce69"
     "5ef02890b1a64899d82dd76d73f9339971d61b99a13ee53f7fe17174a5eb4553c8711469b06d2e8cc418686f"
     "5bab4089d9b951a6eb449c8e91e944a4ff1e6acd337d8377cc2f6cc2603d8dd369b8afa8f85184e91660b200"
     "a34b43d120719e9d3993d12cd86e76fe389e8af50e8ac23d8d6296b16794daa35e95a3573989676968829c4e"
     "a04b5ac1216ec5907e87c5906687ac7e48a89e147ec4316e9b8e75378c8b4356ab8a4fbe8d5fc0717a925098"
     "6536b97042bc885676a9666fa478dc6290ff409ca4f72f78d05c2783b16451bee73d96cd774d78c31459b778"
     "4390e41a69da1767a96cba639ae7297ac90355ab2c3193b45259c3aa0d6cb64c3a8ecf2545b75f0c63ab7031"
     "9fdc2d78d2a851a0f94f48b4a24472ceca55acff4999b57b3d898173368dd94979ef9156cd8071984d9a6b27"
     "89a01574d4378dab60b17180dc468ae91e76cb005cb1273ea1cc6a6be6d21d89e73256c57a3d905a59632382"
     "984e71cc905ca3c17569cf993398c42b69d06856af804e9dc3004ea430816695e248adf93d92df2f81cf2272"
     "c20958b70959a263b36ba9f93b9aea2e83d32175c50263b8384daecc7988e8db4da0f13082d72578c70a69ba"
     "065aaf81409af04163c19b3383e12676d21a6bbb095bab0053a3d20069ba3c718cb87f72dc7f65c5755eb76f"
     "5aaa694c9c5d4c9c4a79c92d9beb188cdc1c7ccc1d75c50e6ec02164bb5d689a8e7763b3774dba6d4cac6740"
     "9f614092557e8442b4842494b1106fd31569c41465b4025dac0058a8e21c81c8556894c33682e52587d82a86"
     "d62984d42783d42682d2257ece267acb2478c81c77c71676c61677c70f79c8015eb13a2d85ac1d72ce226fc0"
     "216dbe1f6cbc1e67bb1d63ba1e62b61c62b31460b00f5faf0e5eae0d5eaeff348dcf4e8355816e3296724495"
     "854a998d4f9f9055af965abc9b58bdad5cbd9e6bc13a78c7007dcc0481d00d85d30e7bd92f66dc696a9b7f7d"
     "387e8529828837878e368c933592a63c9c9643a53246aa004faf0060b5066ab8f04a99b24ea22555b10061b7"
     "1b6db6277abf3385cc4086d94c88e45893ff61a0eb61ab6166b70c71c21d7ecf2d8ee0329cf037abf73eaf9d"
     "48ae1454b70260c41b6cd1287adc3383f93f83e34a865957920c5fa01761ac2561b36259a65360bd2b6fe52a"
     "87b143a55154c44967cd68807a8299299ab73fb3b163b85e768f2c867c3f939762bb8d92ff53bde943de8657"
     "a94d6849317b413795604fb27a68ce9280cdac9373b0a43287c24f76b271895c84972f8e0968ba1b76c53f92"
     "d75ba08a75a9138ec90da5db36b27d44c01b51eb1a68e13183564ba50164c51e79e954a3cf9de56dc8bb53d1"
     "39778227940b59ae0575b82e8dbf3c9aea49a7f660c0887bdc2d9dff33bce84cd75a68e40f761e77d7318dae"
     "58b561828d3aac3f34d24356e76b7db992528f9d25c7483dcf0d673f34930062bd1b87e6608bd3b66a7aae51"
     "675943913256c22c80eb4eaeaa75cf554aa2901d77db359bdb5fcbb78bf865b3df3fd55c66e6167c3888ed4d"
     "a3aa78d5288f911f9c1361c91885f25893c6a26191c831a76e53a7247e553791255dad318fde6882d5c92987"
     "a91f7e205bb01787d159acdd7dcc978bdb4459ab642979a44b80e5769fee89dc77a4d537cf5e69e41f844898"
     "fb66b8c19ef24e7cb64f3146925f7281b8ca5bdea565de6f82997ab76d80d3a657aab450a0618cdb648bdcd4"
     "4096c23d994679d647b0b68adc6c79c98453a3b35db9817ac651af7d89cb59a7a2b95797d134ce616cea258a"
     "50a0ff73c2cdb0ff6272c9680060aa29a07e99ff3ee9a767ff41ab9380ea51affecf67b6fc4999798ada6390"
     "e0d94d9dce4da65a88e960c3a9a2f33376c67a3686ec5fc091a3ed28e27c5af63781aea74791cf32cd626ded"
     "288d"},
    {Fit::kStretch, Filter::kLanczos3, 23, 30, 3,
     "004b9e00509b0a5b9f1663b91e65da2267ec2675f03197ed3bb6fc41bdff4fbcf86bc55982cf008cd6008fe3"
     "1e95f42f93ff3c98ff44b0ba4dd21a56e4005be8165ee52666f42374ff268ff138a7525ab00072b70078c211"
     "75c704549e0957b11864ca2378bf2e8e9e43a79959abae638cbe6b71d57c81e87f9fdd6ca97360b42d6cc53f"
     "7ec25292b242afc53fc5cc50b5915b96286691117aa62e91b646a0cd56a2e76a8ed665816d458a2a3c9e3652"
     "ab5065b11465a81f6ad1357cf84699b555bc3f76f2219af04da58070b3198bdb2aa2ca66ac6c739c2686a234"
     "a7c2668bac944465d72f49f54b6aaa567f38498d1a4faa4565d0687ff183a3e69cce88a4af3d963b45980071"
     "ad1f84bd478d2770c73290ce4fbcc386b76ba8950e8ca8156dbe4a8d8f49da4435ff1948ef1b724f36a8006d"
     "e50699ff666fe4a90c82d30056bf0f7f6241bd076dde0e9ebf42bba341a9e82da6ff3fdd7469e500a1860ad7"
     "3356f62070ff287a3579eb41aaae63de4fb3a41ad5333c71127e08509a31af61acc51ff66030ca076a422494"
     "0073c80fa1f87b81dbc9308bae15684746921470e63490ff76cfa592ec3f59ae8c1771d5288d6161d0008def"
     "09bcbd58e1597af01c874096ff59a0bf839a3099511d8406855d20ac38808c26cb6541cd59808a7ea046a284"
     "409b516dac36a0e18191d4f24d8ec337902669d317a7e57ccfb9a4dd8884cb6e5db18551938f7674629a9a36"
     "93fe2ca3f552d0757bec1b924bbeff7885d3ae2c5e73035b1733ac52aa92a6f6505fbb5e0068a51485e77ba0"
     "eddf68b4d758a26b95e06f98e2ec559add42ae577af753ccbaa3fa4d8acd814896dd56c3a19de149df826ae5"
     "5989acc2529bde40d17173fa219954d39c947d97e10c79ab237130a38335f2837ad37b7b5d754c1b942776e4"
     "5cb6fdee61b9ff39a6928cf54fa0ff895dbd9b659472b89e69dd8d7acc787bb4a473bbb86df7538cf10adb5c"
     "61f6189db69a499ada22d0756bfa25a368e1169c9642e23a80f16d75a7e9463cdd73136db274198dc116686d"
     "63ad408ddab751a5f7409a9e92e535a5ff156adc3b7d737ad0286dc5643e8dcf6baec1aaf65585ff0260b500"
     "a5384bd21f759f9d3992d42ad37672fc2ba68dff0084cb35846c8dc66196f5a3539aac423384626f657baf54"
     "9b4f52c61861c27e7588ca946197b17a37a7a30081ca2a678d8771298c8b374bab8f3ad19d5acf6d738b4b93"
     "513cc25f3ab7944969b95e74a07be26392ff3a9cb1fb276fd55b248baa6440cfe63a9ddb7b3a79c21354c471"
     "458ee6135cea1868a56ab866a1ec2287cd034aab35289ab4534ecda50575c44e2795cc2232cc630b67aa6919"
     "acde2e76e9aa4497fc5034c5a1496ad0c84fb1ff4b92c07c3a80837a288ddf3369ff8643e78e6594519b6c15"
     "90a80274e92883c264b57484e64a87f2117ccd0055b2273ba7d27462ffdb0d9aff2d3bde7a278c5851641383"
     "a03578e1925cbfd76b68da9d25a1d02b60d76550b3805197c50047a52f816b90dd42bbfb3c97e03581c92373"
     "c1014fba0b5aa063b369adfd3ba3f23280ce1d78c0015dbb3d46afca7b88f2d94ea7f83278d72878c10070b9"
     "055bb2863798f24261ce9b337de52570dc1c6cb5095ba80053a3cc0068ba34719bb67d74fb7563d96b5cbd6a"
     "5aac684c905853963786cc16a9f30896e01c78c32572bd1d6bc22762be5b6999947560bb7146c86349bd6239"
     "a860449350917c2fc7850ca0b80168da1667c9196dab005ea70055a8e81985ca566795bc367cf01e87da2989"
     "cf2b85d42784d62682d5287bcf2976c92777c81c79c91576c6197ac9077bc9005db2382c88a81972d42170c2"
     "2371b71f6dbc1e64bc205dba225fb51f62b21460b10d5db10d5eaf0f5fafff3593d8527c5d815d319a614692"
     "83568e91559b905aba8e59cf9b4ec7af50bb9f67c0367ecc0082d20085cf068ac70172dd2653e6675aa6857b"
     "408188327f883c85863389932392ad2ea1983cad303faf0049b20062b8096fbced4a96b14ba42952ba005fc1"
     "126eba2a7ebf2f86ce3c82d64b7feb5a8eff63a1ec63ad6465b60e71c0157dce378bdd399ffd38b4f73cb898"
     "43b2134fb8005ec6156dce2d7ce33782ff427fe54c815e578e0e60a01061ad2f60b2635c9c525cc82867f822"
     "80c633a45e46d6435ad56b77718e9b18adbe30c8ac6dc56480912d817c3c8a9664c3908aff5accf940f59150"
     "bb435c57296a422f8c6341b68667dda586c5c49165bda4228bbd3e75ae77855d899a298d0365b21576cc3e94"
     "d864a3807fa70b98d200add931ad8144c11d45fd0d59e52e78564b9f0062cf0a70f85ba9ce98ea70d2b549d5"
     "35747714a10455ba0082b72995bc3c9df53da7fd50bb8f70e82b99ff25c2e451dd5969e70376116eda2391b0"
     "51b6688a8f24ba431eeb3a52f36379b0a04e8e9e12db4020dd00583c20900067cc0089fb6e89d5ba717eb249"
     "576134841d43d91678ff4dbdac71da5046a58a0a74f01794ee50e3b189ff5cc0df3be25a5eec07803c7ef853"
     "ada67bdb298d910d931363c8069eef5398c4b46190cb37a17956a12585602a8e3067aa259ddf767fcfd42788"
     "a71577205caa0795dd5aaddc95d18f90d94459ab4d2f779e4e6cec7d9cf086e67ba0cd34ca6162e21891438f"
     "ff6ec1bca3f8497cb141343e93566591b7c161efb05bda76828e7dbe6c7fd1aa51a5b7529e5b92dc688bdcd8"
     "3c94c32d9a4174d83abfba8ae16e89c88159a6ac53bd797ac34eb6718dc959b09ebd5c95d031c96767ef1a93"
     "4597fe7bc8ccb7ff6c6cc56c0065ab0ab07f8dff39ffa857ff33b58779ff4fbaffd86eb4ff46977c88d95d96"
     "e2d65a98d74aab6582ef63d19da2f82577bb7a317ef74fc6a1adf523fa7a49f93478ada5438fd233c86a6bf5"
     "1b93"},
    {Fit::kStretch, Filter::kLanczos3, 5, 7, 1,
     "2e7378818985898a6b7e826081d9965369708a7b506d5e717879713d53b38b7b656cc6"},
    {Fit::kStretch, Filter::kBicubic, 23, 30, 1,
     "00010b151e272f39424a566c7d868d939aa2b4cad6dde7f0fff15300000e050b19263242525f6a7a7f6a5f6c"
     "7e96aabcb09699aabac9e2d56a2a3c4a152036495e7896a8b9dbd2652338629bcbeba62e22466079909e999e"
     "b4c12533517393867195c6f5e75500225eadc9b671181e48453f5777a1c6e3f234466b9dc5730a429cd3cb45"
     "00276dc5af3e254470925a2039658db4d9ea445c8a968761373a5287a47a564671debe2e2a758780614a7197"
     "98a9d6ee5373ad7b184fa75a052c74cee0746de6d7585ca280476499d3eab19dd5f36189d3a73f4977684e3b"
     "55d7ff885a91936a687c776e748acef0b199d7f97199e5e1a553146dc46f40b9eb8e441e33776c3d69a88460"
     "a3d19e93d8fe8a8a8db1da9539699c4b2190c5874814318e8c564f5f7a98b9bc766fdcffa4782764e7cd7859"
     "431a176c9a7a553152aab68e450c70dcd2a04844caffb589364991804d27153760808a765c3e6ad2e7c59063"
     "98cca369332b6880c3a466483d2f22090963a99a8375634d79dbf1d7c7baaf9a6333261a0900d2ba8c72655e"
     "5a4c4c799b8c7c756e646877776d67615542241015140200e2c8948287868483827e7a78777677795e2d1d22"
     "211f1e1d1e1c140f0e0dffcf5532444a4f555a585c6b787d81857b666a7d85888e93a69632000006f0b22500"
     "1b2733404c58616166717e8e9cabafaeb7c4d1dcf9e3590c172562532b2a4354678099b7b15e2c3f6292bdde"
     "a94941607a92acb087768997091b3f5b758ea5b2c0ebe156011e549dc8d1820b052e3c49607b9dbcd7e41e31"
     "5882acd2e7b98fc7cf3f001b60b6ae59322c4e754a1d355f8bb3d5e6384d788f9cc9f2c691a7a755253168c9"
     "a92017597d8b59294b7689a4cfe448669e7c315fb8dede996da6b46164d4c246478a79535d7aafcba297ceea"
     "5073b072002999e9ff9351cffc7963d9ce5a60a276365fa3e2f6ae91cded"},
    {Fit::kStretch, Filter::kArea, 5, 20, 3,
     "1060b02e7ece4d9d6d4d9d6d6bbb8b8a5aaaa878c847976747976765b585a87848c696666535856535858353"
     "a3a272c2c090605f2f7f5f2f7f7d4d9d5dada8b55a557a75707a757040908a726d687570c0a84d9da84d9d55"
     "a5f5a045954d9d9868b8b268b8b282d27860b055b85d5895e53595e535ed3d8dab7b4b3c8cdc9666b69666b6"
     "4b9b6b2575c55aaa7a90e03090e03069b9094393e3d42474ae7e4eae7e4e633383bd8d5d72c2922878c82878"
     "c88151a1a348984898935bab515bab516ebe64817c77948f8a52a24752a24765b55a90e0308b868049439349"
     "43935c56a66f69b9827c773f8f8a3f8f8a524d9d4696e692e2325f2f7f5f2f7fcf9f6fc090608c5cac7d4d9d"
     "7d4d9d4999e9de2e7e2a7aca77c79777c79767b78758a878a474c495e53595e535e13181"},
    {Fit::kStretch, Filter::kBicubic, 12, 7, 3,
     "0d5dad3787e163b3a48ee924bb695ae12c863a60b03c95b2a2a83d974ba17e4e9e654ba35aafb2c03a567390"
     "7667646374657c6b5bb85c97b656b063b29d4f7654a6509b7c7d7fcdad72c677be9f9fad7acd8566b49a516e"
     "75819455b15988b860bc7b909c35c0775f79958283877a46a3866a935c766e648c7e7b9886a27b67b72078cb"
     "75ca4178ac76d62882859375156dbfaa964a83db237dcd196bbb272575bb1868ba1060b06a55a5277fd95bab"
     "9c86e11cb36152d9247e3258a8348daa9aa0358f3c9976aa965d579b52b2aab8a34e69886ece5c5b6e5d7463"
     "53b0548fa64ea8a7aa957b66be9e8ba074af76c59e6abe6fb69797a572c57d5e"},
    {Fit::kStretch, Filter::kBicubic, 5, 16, 3,
     "1767c23d93a9647c665aaa8a8b748ab960b032887b5eaea1ba5e4fa1847e5e4f9e8273928275cba89f487354"
     "709746965fbaabb14b5e77737256a6756962766b70ccb54fa053a3f4a33f9b56919c6ac89d6dcc8e6eb354c4"
     "665898de37fe3b8bb27b41638bba988f944a9a6a4675a352b278a2cb336bbb233993c3b249718c7e6f625482"
     "9b8d55709b992b7bb37b53a3b33b9640949652a06665ac7c6b87809499894fab3a6aba488edc368e917c5e33"
     "917449947866b081758a3282933952a2368ede7dcd58654665c7a867be755ea44ba65d4ea64595ecd6587450"
     "68b55dac9d5faf9056a4979e8ca29eee36e42d7d"},
    {Fit::kCrop, Filter::kBicubic, 7, 5, 3,
     "8c76b766968786a558a573648644a28383656d5ab98f5aba6770b45bbfa45665a4a175b86881bf6ca67f6ec9"
     "763b88977dcc3757a373ab4c80825c6b60b57679cd2978cf206e838b713f93a5608254669a7bb87a886b765b"
     "66a8c28775785bb7905ebb6187ae60c388"},
    {Fit::kCrop, Filter::kLanczos3, 4, 9, 3,
     "8e7b8d7370605a887b915dcf8d61d061a2af64df8d949c46dd8d598a92758d84884466ad899985589297887c"
     "6c809460a69259a67595a06d8056a89347ab7082e60c6ab8408a51a77d4d773d8bb40458c1745c9f40ab6d82"
     "8799618e727de3308282657032ac8f7387406c8f"},
    {Fit::kCrop, Filter::kBilinear, 9, 40, 1,
     "7984b0dbcdac885a2c4d88a8784771bae1a66b4d3a3355766d564e72968e77719dc8bd9e93bee9f485899aaa"
     "b1b6ab743d517e9466385ea2c89a6b4b312958877f655566767d828ba5beaa867ab2e9f7928d786383b3cb98"
     "645d656344244984a98a6b523b376a9c98816b56416191b6b5b494695ba2e9fb9e9262325da6d2a5785f4b3a"
     "2f234373917e6b5844447ab0b09d845729559ed0baa37c504089d2e4aba07447577b8f715240302a40556a80"
     "8c7d6d5e4e518cc6c9b9a7896a7ea2b698795c3e31557881b7ad855c514f4a3c2d20151a5086918c867b6f63"
     "585e9ddbe1d5c8baaca7a59b754f3b2c21201e1ec3ba95706159514941393136628d928981797169616487a9"
     "aca49c948c847c6f53372a2119110907d0c8a7857a75716d68645f60728485807c7874706b6765635f5a5652"
     "4d49443e31231d1814100c0bdcd3ae897f7f7e7e7d7c7c7b7a79787877777675756d53393131302f2e2e2d2d"
     "2c2b23170f0f0e0e"},
};

TEST(ResizeTest, MatchesPillowWithinOne) {
  for (const PillowCase& pc : kPillowCases) {
    SCOPED_TRACE(testing::Message() << "filter " << static_cast<int>(pc.filter) << ", fit "
                                    << static_cast<int>(pc.fit) << ", " << pc.out_height
                                    << "x" << pc.out_width << "x" << pc.channels);
    const std::vector<uint8_t> expected = FromHex(pc.hex);
    ASSERT_EQ(expected.size(), static_cast<size_t>(pc.out_height) * pc.out_width * pc.channels);
    StatusOr<Image> out =
        ResizeFit(PillowSource(pc.channels), pc.out_height, pc.out_width, pc.fit, pc.filter,
                  nullptr);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->height, pc.out_height);
    EXPECT_EQ(out->width, pc.out_width);
    EXPECT_EQ(out->channels, pc.channels);
    ASSERT_EQ(out->pixels.size(), expected.size());
    EXPECT_LE(MaxAbsDiff(out->pixels, expected), 1);
  }
}

TEST(ResizeTest, SameSizeIsAnExactCopy) {
  for (int channels : {1, 3}) {
    const Image src = NoiseImage(9, 13, channels, 7);
    for (Filter filter : kAllFilters) {
      StatusOr<Image> out = Resize(src, 9, 13, filter);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ(out->pixels, src.pixels);
      EXPECT_EQ(out->height, 9);
      EXPECT_EQ(out->width, 13);
      EXPECT_EQ(out->channels, channels);
    }
  }
}

TEST(ResizeTest, ConstantImageStaysConstantForEveryFilterAndRatio) {
  const int sizes[][2] = {{1, 1},   {5, 7},   {10, 10}, {17, 3},  {24, 32},
                          {49, 63}, {97, 11}, {3, 130}, {200, 150}};
  for (int channels : {1, 3}) {
    for (uint8_t value : {uint8_t{0}, uint8_t{1}, uint8_t{137}, uint8_t{254}, uint8_t{255}}) {
      const Image src = MakeImage(24, 32, channels, value);
      for (Filter filter : kAllFilters) {
        for (const auto& size : sizes) {
          SCOPED_TRACE(testing::Message() << "filter " << static_cast<int>(filter) << ", "
                                          << size[0] << "x" << size[1] << "x" << channels
                                          << " of " << int{value});
          StatusOr<Image> out = Resize(src, size[0], size[1], filter);
          ASSERT_TRUE(out.ok()) << out.status().ToString();
          ASSERT_EQ(out->pixels.size(), static_cast<size_t>(size[0]) * size[1] * channels);
          EXPECT_TRUE(std::all_of(out->pixels.begin(), out->pixels.end(),
                                  [&](uint8_t v) { return v == value; }));
          StatusOr<Image> crop =
              ResizeFit(src, size[0], size[1], Fit::kCrop, filter, nullptr);
          ASSERT_TRUE(crop.ok()) << crop.status().ToString();
          EXPECT_TRUE(std::all_of(crop->pixels.begin(), crop->pixels.end(),
                                  [&](uint8_t v) { return v == value; }));
        }
      }
    }
  }
}

TEST(ResizeTest, AreaDownscaleByIntegerFactorIsBlockAverage) {
  for (int channels : {1, 3}) {
    for (int factor : {2, 3, 4}) {
      const Image src = NoiseImage(12 * factor, 8 * factor, channels, 42 + factor);
      StatusOr<Image> out = Resize(src, 12, 8, Filter::kArea);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      for (int y = 0; y < 12; ++y) {
        for (int x = 0; x < 8; ++x) {
          for (int c = 0; c < channels; ++c) {
            int sum = 0;
            for (int dy = 0; dy < factor; ++dy) {
              for (int dx = 0; dx < factor; ++dx) {
                sum += src.row(y * factor + dy)[(x * factor + dx) * channels + c];
              }
            }
            const double mean = static_cast<double>(sum) / (factor * factor);
            EXPECT_NEAR(out->row(y)[x * channels + c], mean, 1.0)
                << "factor " << factor << " at " << y << "," << x << "," << c;
          }
        }
      }
    }
  }
}

TEST(ResizeTest, AreaDownscaleToOnePixelIsTheMean) {
  const Image src = NoiseImage(30, 20, 3, 5);
  StatusOr<Image> out = Resize(src, 1, 1, Filter::kArea);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->pixels.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    double sum = 0;
    for (size_t i = c; i < src.pixels.size(); i += 3) sum += src.pixels[i];
    EXPECT_NEAR(out->pixels[c], sum / 600, 1.0) << "channel " << c;
  }
}

TEST(ResizeTest, UpscaleKeepsTheValueRange) {
  Image src = MakeImage(2, 2, 1);
  src.pixels = {0, 255, 255, 0};
  for (Filter filter : kAllFilters) {
    StatusOr<Image> out = Resize(src, 7, 9, filter);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->height, 7);
    EXPECT_EQ(out->width, 9);
    // Corners stay close to the source corners; lobes are clipped, never wrapped.
    EXPECT_LE(out->row(0)[0], 40);
    EXPECT_GE(out->row(0)[8], 215);
    EXPECT_GE(out->row(6)[0], 215);
    EXPECT_LE(out->row(6)[8], 40);
  }
}

TEST(ResizeTest, StretchIsResize) {
  const Image src = NoiseImage(20, 30, 3, 9);
  for (Filter filter : kAllFilters) {
    StatusOr<Image> a = Resize(src, 11, 7, filter);
    StatusOr<Image> b = ResizeFit(src, 11, 7, Fit::kStretch, filter, nullptr);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->pixels, b->pixels);
  }
}

// Columns: 4 red, 8 green, 4 blue. The centred 8x8 square is all green.
TEST(ResizeFitTest, CropKeepsTheCentreOfAWideImage) {
  Image src = MakeImage(8, 16, 3);
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 16; ++x) {
      src.row(y)[x * 3 + (x < 4 ? 0 : x < 12 ? 1 : 2)] = 200;
    }
  }
  for (Filter filter : kAllFilters) {
    StatusOr<Image> out = ResizeFit(src, 4, 4, Fit::kCrop, filter, nullptr);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->height, 4);
    ASSERT_EQ(out->width, 4);
    if (filter == Filter::kArea) {
      for (size_t i = 0; i < out->pixels.size(); i += 3) {
        EXPECT_EQ(out->pixels[i + 0], 0) << "pixel " << i / 3;
        EXPECT_EQ(out->pixels[i + 1], 200) << "pixel " << i / 3;
        EXPECT_EQ(out->pixels[i + 2], 0) << "pixel " << i / 3;
      }
    }
    // Wider kernels reach past the crop edge (as Pillow's do), but the middle is green.
    EXPECT_EQ(out->row(1)[1 * 3 + 1], 200);
    EXPECT_EQ(out->row(2)[2 * 3 + 1], 200);
  }
}

// Rows: 3 black, 4 white, 3 black; a 4x2 (height x width) crop at scale 1 keeps the
// white rows.
TEST(ResizeFitTest, CropKeepsTheCentreOfATallImage) {
  Image src = MakeImage(10, 2, 1);
  for (int y = 3; y < 7; ++y) std::fill(src.row(y), src.row(y) + 2, 255);
  StatusOr<Image> out = ResizeFit(src, 4, 2, Fit::kCrop, Filter::kLanczos3, nullptr);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->pixels, std::vector<uint8_t>(8, 255));
}

TEST(ResizeFitTest, PadCentresAWideImageWithThePadColour) {
  const uint8_t pad[3] = {10, 20, 30};
  const Image src = MakeImage(6, 12, 3, 200);
  StatusOr<Image> out = ResizeFit(src, 8, 8, Fit::kPad, Filter::kBilinear, pad);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->height, 8);
  ASSERT_EQ(out->width, 8);
  // 6x12 scaled to width 8 is 4x8, placed at rows 2..5.
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) {
      const uint8_t* p = out->row(y) + x * 3;
      if (y >= 2 && y < 6) {
        EXPECT_EQ(p[0], 200) << y << "," << x;
        EXPECT_EQ(p[1], 200) << y << "," << x;
        EXPECT_EQ(p[2], 200) << y << "," << x;
      } else {
        EXPECT_EQ(p[0], 10) << y << "," << x;
        EXPECT_EQ(p[1], 20) << y << "," << x;
        EXPECT_EQ(p[2], 30) << y << "," << x;
      }
    }
  }
}

TEST(ResizeFitTest, PadPutsTheOddPixelRightOfATallImage) {
  const uint8_t pad[3] = {0, 0, 0};
  const Image src = MakeImage(10, 4, 1, 99);
  // 10x4 into 5x5: scale 1/2, so 5x2 with 3 columns of margin: 1 left, 2 right.
  StatusOr<Image> out = ResizeFit(src, 5, 5, Fit::kPad, Filter::kArea, pad);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int y = 0; y < 5; ++y) {
    EXPECT_EQ(std::vector<uint8_t>(out->row(y), out->row(y) + 5),
              (std::vector<uint8_t>{0, 99, 99, 0, 0}))
        << "row " << y;
  }
}

TEST(ResizeFitTest, PadFillsGrayWithTheLumaOfThePadColour) {
  const uint8_t pad[3] = {255, 128, 0};  // luma (19595*255 + 38470*128 + 32768) >> 16 = 151
  const Image src = MakeImage(2, 4, 1, 7);
  StatusOr<Image> out = ResizeFit(src, 4, 4, Fit::kPad, Filter::kBicubic, pad);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->pixels, (std::vector<uint8_t>{151, 151, 151, 151, 7, 7, 7, 7,  //
                                               7, 7, 7, 7, 151, 151, 151, 151}));
}

TEST(ResizeFitTest, PadRoundsTheResizedSideHalfUp) {
  const uint8_t pad[3] = {0, 0, 0};
  // 4x6 into width 9: height 4 * 9 / 6 = 6 exactly; into width 3: 4 * 3 / 6 = 2;
  // 5x6 into width 3: 2.5 rounds up to 3.
  const Image src = MakeImage(5, 6, 1, 50);
  StatusOr<Image> out = ResizeFit(src, 6, 3, Fit::kPad, Filter::kArea, pad);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // 3 content rows in 6: offset floor(3 / 2) = 1.
  EXPECT_EQ(out->pixels, (std::vector<uint8_t>{0, 0, 0, 50, 50, 50, 50, 50, 50,  //
                                               50, 50, 50, 0, 0, 0, 0, 0, 0}));
}

TEST(ResizeFitTest, PadWithoutAColourIsInvalidArgument) {
  StatusOr<Image> out = ResizeFit(MakeImage(4, 8, 3), 4, 4, Fit::kPad, Filter::kArea, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("pad colour"), std::string::npos);
}

TEST(ResizeFitTest, SameAspectRatioIsAPlainResize) {
  const uint8_t pad[3] = {1, 2, 3};
  const Image src = NoiseImage(20, 30, 3, 11);
  StatusOr<Image> plain = Resize(src, 8, 12, Filter::kLanczos3);
  ASSERT_TRUE(plain.ok());
  for (Fit fit : {Fit::kCrop, Fit::kPad}) {
    StatusOr<Image> out = ResizeFit(src, 8, 12, fit, Filter::kLanczos3, pad);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->pixels, plain->pixels);
  }
}

TEST(ResizeMaxSideTest, SmallImageIsCopiedUnchanged) {
  const Image src = NoiseImage(30, 40, 3, 3);
  for (int max_side : {40, 41, 1000}) {
    StatusOr<Image> out = ResizeMaxSide(src, max_side, Filter::kBicubic);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->height, 30);
    EXPECT_EQ(out->width, 40);
    EXPECT_EQ(out->pixels, src.pixels);
  }
}

TEST(ResizeMaxSideTest, ShorterSideRoundsHalfUpAndIsAtLeastOne) {
  struct Case {
    int height, width, max_side, out_height, out_width;
  };
  const Case cases[] = {
      {67, 100, 50, 34, 50},   // 33.5 rounds up
      {100, 67, 50, 50, 34},   // portrait
      {66, 100, 50, 33, 50},   // exact
      {100, 65, 50, 50, 33},   // 32.5 rounds up
      {101, 3, 10, 10, 1},     // 0.297 becomes 1
      {80, 80, 64, 64, 64},    // square stays square
      {375, 500, 256, 192, 256},
      {499, 500, 256, 255, 256},  // 255.488
  };
  for (const Case& c : cases) {
    StatusOr<Image> out = ResizeMaxSide(MakeImage(c.height, c.width, 1, 9), c.max_side,
                                        Filter::kArea);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->height, c.out_height) << c.height << "x" << c.width;
    EXPECT_EQ(out->width, c.out_width) << c.height << "x" << c.width;
    EXPECT_EQ(out->pixels, std::vector<uint8_t>(
                               static_cast<size_t>(c.out_height) * c.out_width, 9));
  }
}

void ExpectInvalid(const StatusOr<Image>& out, const std::string& fragment) {
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(fragment), std::string::npos)
      << out.status().message();
}

TEST(ResizeTest, NonPositiveOrHugeOutputSizeIsInvalidArgument) {
  const Image src = MakeImage(4, 4, 3);
  ExpectInvalid(Resize(src, 0, 4, Filter::kArea), "output size 0x4");
  ExpectInvalid(Resize(src, 4, -1, Filter::kArea), "output size 4x-1");
  ExpectInvalid(Resize(src, 4, kMaxResizeSide + 1, Filter::kArea), "must be in 1..65500");
  ExpectInvalid(ResizeFit(src, -3, 4, Fit::kCrop, Filter::kArea, nullptr), "output size -3x4");
  ExpectInvalid(ResizeMaxSide(src, 0, Filter::kArea), "max side 0");
}

TEST(ResizeTest, BadSourceIsInvalidArgument) {
  ExpectInvalid(Resize(MakeImage(4, 4, 2), 2, 2, Filter::kArea), "2 channels, expected 1 or 3");
  ExpectInvalid(Resize(MakeImage(4, 4, 4), 2, 2, Filter::kArea), "4 channels, expected 1 or 3");
  ExpectInvalid(Resize(MakeImage(0, 4, 3), 2, 2, Filter::kArea), "source size 0x4");
  Image short_pixels = MakeImage(4, 4, 3);
  short_pixels.pixels.pop_back();
  ExpectInvalid(Resize(short_pixels, 2, 2, Filter::kArea), "holds 47 bytes, expected 48");
  ExpectInvalid(ResizeMaxSide(short_pixels, 2, Filter::kArea), "holds 47 bytes");
  ExpectInvalid(ResizeFit(short_pixels, 2, 2, Fit::kStretch, Filter::kArea, nullptr),
                "holds 47 bytes");
}

}  // namespace
}  // namespace shardpack::image
