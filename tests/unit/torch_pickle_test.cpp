// The pickle reader of the DeepSpeed import (checkpoint/deepspeed/pickle.h) on what Python's
// own pickle writes, at protocols 2 (torch.save's) and 4: every container and scalar, shared
// objects through the memo, negative and wide integers, bytes, and a class Python would need
// DeepSpeed installed for (its loss scaler), read as an object with its state. Then damage:
// a truncated pickle and an opcode it does not know, each a CheckpointError naming the file.
#include <gtest/gtest.h>

#include <string>

#include "zerotrain/checkpoint/deepspeed/pickle.h"
#include "zerotrain/core/error.h"

namespace pk = zerotrain::checkpoint::pickle;
using Kind = pk::Value::Kind;

namespace {

// pickle.dumps({'a': 1, 'neg': -5, 'big': 2**40, 'nbig': -2**40, 'f': 0.5, 's': 'text', 'n': None,
// 't': True, 'l': [1, 2, 3], 'tup': (1, 'x'), 'od': OrderedDict([('k', 7)]),
// 'scaler': deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler() (cur_scale 512.0, cur_iter 3),
// 'shared': [lst, lst] with lst = [1, 2], 'bytes': b'ab'}, protocol=P).hex()
const char* kProtocol2 =
    "80027d71002858010000006171014b0158030000006e656771024afbffffff580300000062696771038a0600000000000158040000006e"
    "62696771048a060000000000ff5801000000667105473fe00000000000005801000000737106580400000074657874710758010000006e"
    "71084e58010000007471098858010000006c710a5d710b284b014b024b03655803000000747570710c4b01580100000078710d86710e58"
    "020000006f64710f63636f6c6c656374696f6e730a4f726465726564446963740a71102952711158010000006b71124b07735806000000"
    "7363616c65727113636465657073706565642e72756e74696d652e667031362e6c6f73735f7363616c65720a44796e616d69634c6f7373"
    "5363616c65720a7114298171157d71162858090000006375725f7363616c65711747408000000000000058080000006375725f69746572"
    "71184b037562580600000073686172656471195d711a285d711b284b014b0265681b6558050000006279746573711c635f636f64656373"
    "0a656e636f64650a711d58020000006162711e58060000006c6174696e31711f867120527121752e";
const char* kProtocol4 =
    "80049530010000000000007d94288c0161944b018c036e6567944afbffffff8c03626967948a060000000000018c046e626967948a0600"
    "00000000ff8c016694473fe00000000000008c0173948c0474657874948c016e944e8c017494888c016c945d94284b014b024b03658c03"
    "747570944b018c01789486948c026f64948c0b636f6c6c656374696f6e73948c0b4f726465726564446963749493942952948c016b944b"
    "07738c067363616c6572948c226465657073706565642e72756e74696d652e667031362e6c6f73735f7363616c6572948c1144796e616d"
    "69634c6f73735363616c65729493942981947d94288c096375725f7363616c65944740800000000000008c086375725f69746572944b03"
    "75628c06736861726564945d94285d94284b014b0265681f658c056279746573944302616294752e";

std::string bytes_of(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string error_of(const std::string& bytes) {
  try {
    pk::unpickle(bytes, "example.pt");
  } catch (const zerotrain::CheckpointError& e) {
    return e.what();
  }
  return "<no CheckpointError>";
}

}  // namespace

TEST(TorchPickle, ReadsEveryKindOfValueAtProtocolsTwoAndFour) {
  for (const char* hex : {kProtocol2, kProtocol4}) {
    SCOPED_TRACE(hex == kProtocol2 ? "protocol 2" : "protocol 4");
    const std::string bytes = bytes_of(hex);
    const auto pickle = pk::unpickle(bytes, "example.pt");
    const pk::Value* root = &pickle->root();
    ASSERT_TRUE(root->is(Kind::kDict));
    EXPECT_EQ(root->at("a", "t").as_int("a"), 1);
    EXPECT_EQ(root->at("neg", "t").as_int("neg"), -5);
    EXPECT_EQ(root->at("big", "t").as_int("big"), int64_t{1} << 40);
    EXPECT_EQ(root->at("nbig", "t").as_int("nbig"), -(int64_t{1} << 40));
    EXPECT_EQ(root->at("f", "t").as_number("f"), 0.5);
    EXPECT_EQ(root->at("s", "t").as_string("s"), "text");
    EXPECT_TRUE(root->at("n", "t").is_none());
    EXPECT_EQ(root->at("t", "t").as_int("t"), 1);
    const auto& list = root->at("l", "t").as_items("l");
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[2]->as_int("l[2]"), 3);
    const auto& tuple = root->at("tup", "t").as_items("tup");
    ASSERT_EQ(tuple.size(), 2u);
    EXPECT_EQ(tuple[1]->as_string("tup[1]"), "x");
    EXPECT_EQ(root->at("od", "t").at("k", "od").as_int("k"), 7);
    const pk::Value& scaler = root->at("scaler", "t");
    EXPECT_TRUE(scaler.is(Kind::kObject));
    EXPECT_EQ(scaler.text, "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler");
    EXPECT_EQ(scaler.at("cur_scale", "scaler").as_number("cur_scale"), 512.0);
    EXPECT_EQ(scaler.at("cur_iter", "scaler").as_int("cur_iter"), 3);
    const auto& shared = root->at("shared", "t").as_items("shared");
    ASSERT_EQ(shared.size(), 2u);
    EXPECT_EQ(shared[0], shared[1]) << "the memo gives the same object twice";
    EXPECT_EQ(root->at("bytes", "t").text, "ab");
    EXPECT_TRUE(root->at("bytes", "t").is(Kind::kBytes));
  }
}

TEST(TorchPickle, DamageIsACheckpointErrorNamingTheFile) {
  const std::string bytes = bytes_of(kProtocol2);
  for (size_t cut : {size_t{1}, size_t{2}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    const std::string e = error_of(bytes.substr(0, cut));
    EXPECT_NE(e.find("example.pt"), std::string::npos) << cut << ": " << e;
  }
  std::string unknown = bytes;
  unknown[2] = '\xff';
  EXPECT_NE(error_of(unknown).find("opcode 0xff"), std::string::npos) << error_of(unknown);
  EXPECT_NE(error_of("").find("example.pt"), std::string::npos);
}

TEST(TorchPickle, AValueOfTheWrongKindIsNamedInTheError) {
  const auto pickle = pk::unpickle(bytes_of(kProtocol2), "example.pt");
  const pk::Value* root = &pickle->root();
  try {
    root->at("s", "t").as_int("optimizer_state_dict.cur_iter");
    FAIL() << "a string read as an int";
  } catch (const zerotrain::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_state_dict.cur_iter: expected an integer, found the string 'text'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(root->at("missing", "model states"), zerotrain::CheckpointError);
}
