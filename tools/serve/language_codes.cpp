#include "serve/language_codes.h"

#include <cctype>

namespace petrel::serve {
namespace {

struct Language {
  const char* iso1;  // ISO 639-1
  const char* iso3;  // ISO 639-2/T (= 639-3 for individual languages)
  const char* name;
};

// ISO 639-1 languages with their three-letter codes.
constexpr Language kLanguages[] = {
    {"af", "afr", "Afrikaans"},   {"am", "amh", "Amharic"},      {"ar", "ara", "Arabic"},
    {"as", "asm", "Assamese"},    {"az", "aze", "Azerbaijani"},  {"ba", "bak", "Bashkir"},
    {"be", "bel", "Belarusian"},  {"bg", "bul", "Bulgarian"},    {"bn", "ben", "Bengali"},
    {"bo", "bod", "Tibetan"},     {"br", "bre", "Breton"},       {"bs", "bos", "Bosnian"},
    {"ca", "cat", "Catalan"},     {"cs", "ces", "Czech"},        {"cy", "cym", "Welsh"},
    {"da", "dan", "Danish"},      {"de", "deu", "German"},       {"dz", "dzo", "Dzongkha"},
    {"el", "ell", "Greek"},       {"en", "eng", "English"},      {"eo", "epo", "Esperanto"},
    {"es", "spa", "Spanish"},     {"et", "est", "Estonian"},     {"eu", "eus", "Basque"},
    {"fa", "fas", "Persian"},     {"ff", "ful", "Fulah"},        {"fi", "fin", "Finnish"},
    {"fj", "fij", "Fijian"},      {"fo", "fao", "Faroese"},      {"fr", "fra", "French"},
    {"fy", "fry", "Western Frisian"}, {"ga", "gle", "Irish"},    {"gd", "gla", "Scottish Gaelic"},
    {"gl", "glg", "Galician"},    {"gn", "grn", "Guarani"},      {"gu", "guj", "Gujarati"},
    {"ha", "hau", "Hausa"},       {"he", "heb", "Hebrew"},       {"hi", "hin", "Hindi"},
    {"hr", "hrv", "Croatian"},    {"ht", "hat", "Haitian Creole"}, {"hu", "hun", "Hungarian"},
    {"hy", "hye", "Armenian"},    {"id", "ind", "Indonesian"},   {"ig", "ibo", "Igbo"},
    {"ilo", "ilo", "Iloko"},      {"is", "isl", "Icelandic"},    {"it", "ita", "Italian"},
    {"ja", "jpn", "Japanese"},    {"jv", "jav", "Javanese"},     {"ka", "kat", "Georgian"},
    {"kk", "kaz", "Kazakh"},      {"km", "khm", "Khmer"},        {"kn", "kan", "Kannada"},
    {"ko", "kor", "Korean"},      {"ks", "kas", "Kashmiri"},     {"ku", "kur", "Kurdish"},
    {"ky", "kir", "Kyrgyz"},      {"la", "lat", "Latin"},        {"lb", "ltz", "Luxembourgish"},
    {"lg", "lug", "Ganda"},       {"ln", "lin", "Lingala"},      {"lo", "lao", "Lao"},
    {"lt", "lit", "Lithuanian"},  {"lv", "lav", "Latvian"},      {"mg", "mlg", "Malagasy"},
    {"mi", "mri", "Maori"},       {"mk", "mkd", "Macedonian"},   {"ml", "mal", "Malayalam"},
    {"mn", "mon", "Mongolian"},   {"mr", "mar", "Marathi"},      {"ms", "msa", "Malay"},
    {"mt", "mlt", "Maltese"},     {"my", "mya", "Burmese"},      {"nb", "nob", "Norwegian Bokmål"},
    {"ne", "nep", "Nepali"},      {"nl", "nld", "Dutch"},        {"nn", "nno", "Norwegian Nynorsk"},
    {"no", "nor", "Norwegian"},   {"ny", "nya", "Chichewa"},     {"oc", "oci", "Occitan"},
    {"om", "orm", "Oromo"},       {"or", "ori", "Odia"},         {"pa", "pan", "Punjabi"},
    {"pl", "pol", "Polish"},      {"ps", "pus", "Pashto"},       {"pt", "por", "Portuguese"},
    {"qu", "que", "Quechua"},     {"rn", "run", "Kirundi"},      {"ro", "ron", "Romanian"},
    {"ru", "rus", "Russian"},     {"rw", "kin", "Kinyarwanda"},  {"sa", "san", "Sanskrit"},
    {"sc", "srd", "Sardinian"},   {"sd", "snd", "Sindhi"},       {"si", "sin", "Sinhala"},
    {"sk", "slk", "Slovak"},      {"sl", "slv", "Slovenian"},    {"sm", "smo", "Samoan"},
    {"sn", "sna", "Shona"},       {"so", "som", "Somali"},       {"sq", "sqi", "Albanian"},
    {"sr", "srp", "Serbian"},     {"ss", "ssw", "Swati"},        {"st", "sot", "Southern Sotho"},
    {"su", "sun", "Sundanese"},   {"sv", "swe", "Swedish"},      {"sw", "swa", "Swahili"},
    {"ta", "tam", "Tamil"},       {"te", "tel", "Telugu"},       {"tg", "tgk", "Tajik"},
    {"th", "tha", "Thai"},        {"ti", "tir", "Tigrinya"},     {"tk", "tuk", "Turkmen"},
    {"tl", "tgl", "Tagalog"},     {"tn", "tsn", "Tswana"},       {"tr", "tur", "Turkish"},
    {"ts", "tso", "Tsonga"},      {"tt", "tat", "Tatar"},        {"ug", "uig", "Uyghur"},
    {"uk", "ukr", "Ukrainian"},   {"ur", "urd", "Urdu"},         {"uz", "uzb", "Uzbek"},
    {"vi", "vie", "Vietnamese"},  {"wo", "wol", "Wolof"},        {"xh", "xho", "Xhosa"},
    {"yi", "yid", "Yiddish"},     {"yo", "yor", "Yoruba"},       {"zh", "zho", "Chinese"},
    {"zu", "zul", "Zulu"},        {"zt", "", "Chinese (traditional)"},
    {"ast", "ast", "Asturian"},   {"ceb", "ceb", "Cebuano"},     {"fil", "fil", "Filipino"},
    {"haw", "haw", "Hawaiian"},   {"hmn", "hmn", "Hmong"},       {"kab", "kab", "Kabyle"},
    {"ckb", "ckb", "Central Kurdish"}, {"ns", "nso", "Northern Sotho"},
};

// NLLB's individual languages whose macrolanguage has the ISO 639-1 code.
struct Individual {
  const char* iso3;
  const char* iso1;
};
constexpr Individual kIndividuals[] = {
    {"arb", "ar"}, {"azj", "az"}, {"zsm", "ms"}, {"pes", "fa"}, {"khk", "mn"}, {"ydd", "yi"},
    {"uzn", "uz"}, {"plt", "mg"}, {"gaz", "om"}, {"lvs", "lv"}, {"ekk", "et"}, {"npi", "ne"},
    {"swh", "sw"}, {"als", "sq"}, {"quy", "qu"}, {"ory", "or"}, {"pbt", "ps"}, {"kmr", "ku"},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string client_language_code(std::string_view code) {
  std::string_view bare = code;
  if (bare.size() > 4 && bare.substr(0, 2) == "__" && bare.substr(bare.size() - 2) == "__")  // M2M100
    bare = bare.substr(2, bare.size() - 4);
  else if (bare.size() > 4 && bare.substr(0, 2) == ">>" && bare.substr(bare.size() - 2) == "<<")  // opus-mt
    bare = bare.substr(2, bare.size() - 4);
  std::string script;
  if (const size_t sep = bare.find('_'); sep != std::string_view::npos) {  // NLLB eng_Latn, mBART en_XX
    script = std::string(bare.substr(sep + 1));
    bare = bare.substr(0, sep);
  }
  const std::string base = lower(bare);
  if (base == "zho" || base == "zh") {
    if (script == "Hant" || script == "TW") return "zt";  // LibreTranslate's code
    return "zh";
  }
  if (base.size() == 3) {
    for (const Individual& i : kIndividuals)
      if (base == i.iso3) return i.iso1;
    for (const Language& l : kLanguages)
      if (base == l.iso3 && std::string_view(l.iso1).size() == 2) return l.iso1;
  }
  if (script.empty() || base.size() == 2) return base;
  return std::string(code);  // no shorter code: the model's, e.g. ace_Arab
}

std::string language_name(std::string_view code) {
  for (const Language& l : kLanguages)
    if (code == l.iso1) return l.name;
  return std::string(code);
}

}  // namespace petrel::serve
