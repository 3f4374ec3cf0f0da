#include "sim/strategies/parm/parm_model.hpp"

namespace moesim::strategies::parm {

double ParmInputs::tokens_per_expert() const {
  return top_k * capacity_factor * static_cast<double>(batch) * static_cast<double>(seq_len) / experts;
}

double ParmInputs::token_bytes() const {
  return static_cast<double>(batch) * static_cast<double>(seq_len) * static_cast<double>(embed) * bytes_per_element;
}

double ParmInputs::dispatch_bytes() const {
  return experts * tokens_per_expert() * static_cast<double>(embed) * bytes_per_element;
}

std::string to_string(Collective c) {
  switch (c) {
    case Collective::AllGather: return "AllGather";
    case Collective::AllReduce: return "AllReduce";
    case Collective::AllToAll: return "AlltoAll";
  }
  return "?";
}

std::string to_string(Group g) {
  switch (g) {
    case Group::MP: return "MP";
    case Group::EP: return "EP";
    case Group::ESP: return "ESP";
    case Group::EP_ESP: return "EP&ESP";
  }
  return "?";
}

std::string to_string(Schedule s) {
  switch (s) {
    case Schedule::Baseline: return "baseline";
    case Schedule::S1: return "S1";
    case Schedule::S2: return "S2";
  }
  return "?";
}

std::vector<Communication> communications(const ParmInputs& in, Schedule s) {
  const double blm = in.token_bytes();
  const double etm = in.dispatch_bytes();
  const double n_esp = in.n_esp;
  const double n_mp = in.n_mp;
  std::vector<Communication> out;
  switch (s) {
    case Schedule::Baseline:
      // Eq. 1: AG_ESP(BLM·N_ESP) + A2A_EP(ETM·N_ESP) + AR_ESP(ETM·N_ESP) + A2A_EP(ETM·N_ESP),
      // in the order of Fig. 3(a). N_MP does not enter: every GPU of an MP group repeats the work.
      out.push_back({"ESP-AllGather", Collective::AllGather, Group::ESP, blm * n_esp, false});
      out.push_back({"EP-AlltoAll dispatch", Collective::AllToAll, Group::EP, etm * n_esp, false});
      out.push_back({"ESP-AllReduce", Collective::AllReduce, Group::ESP, etm * n_esp, false});
      out.push_back({"EP-AlltoAll combine", Collective::AllToAll, Group::EP, etm * n_esp, false});
      break;
    case Schedule::S1:
      // Eq. 11/13: 2·A2A_EP&ESP(ETM·N_ESP/N_MP) + AG_MP(BLM); MP-Split before the gate (Fig. 3b).
      out.push_back({"EP&ESP-AlltoAll dispatch", Collective::AllToAll, Group::EP_ESP, etm * n_esp / n_mp, false});
      out.push_back({"EP&ESP-AlltoAll combine", Collective::AllToAll, Group::EP_ESP, etm * n_esp / n_mp, false});
      if (in.n_mp > 1) out.push_back({"MP-AllGather", Collective::AllGather, Group::MP, blm, false});
      break;
    case Schedule::S2:
      // Eq. 7/14: A2A_EP&ESP(ETM·N_ESP/N_MP), then the combine A2A_EP&ESP(ETM·N_ESP/N_MP) run
      // simultaneously with AG_MP(ETM) by SAA; MP-Split after the gate (Fig. 3c).
      out.push_back({"EP&ESP-AlltoAll dispatch", Collective::AllToAll, Group::EP_ESP, etm * n_esp / n_mp, false});
      out.push_back({"EP&ESP-AlltoAll combine", Collective::AllToAll, Group::EP_ESP, etm * n_esp / n_mp,
                     in.n_mp > 1});
      if (in.n_mp > 1) out.push_back({"MP-AllGather", Collective::AllGather, Group::MP, etm, true});
      break;
  }
  return out;
}

double total_bytes(const ParmInputs& in, Schedule s) {
  double sum = 0;
  for (const Communication& c : communications(in, s)) sum += c.bytes;
  return sum;
}

Choice choose_schedule(const ParmInputs& in, const ChoiceParams& p) {
  // Algorithm 1, with T from Table I (line 2's extra M is not applied; see the header).
  const double x = in.token_bytes();                         // line 1: x = B·L·M
  const double y = in.dispatch_bytes() * in.n_esp;           // line 3: y = E·T·M·N_ESP
  const double n_mp = in.n_mp;
  Choice c;
  c.t_d1 = 2 * p.a2a_ep_esp.time(y / n_mp) + p.ag_mp.time(x);  // line 4
  c.t_d2 = p.a2a_ep_esp.time(y / n_mp) + p.overlap.time(y);    // line 5
  c.schedule = c.t_d1 <= c.t_d2 ? Schedule::S1 : Schedule::S2; // lines 6–9
  return c;
}

}  // namespace moesim::strategies::parm
