/**
 * Word pools of the generated sets. Casts (people and places) differ per set; the rest is shared.
 * "Rare" pools (companies, brands, codenames, universities, book titles) are made-up words the
 * static model does not know, so only the keyword tier can match them.
 */

export interface CastPerson {
  name: string;
  /** she / he */
  he: 'she' | 'he';
}

export interface Cast {
  label: string;
  people: CastPerson[];
  /** Relatives, partners and friends mentioned in the chats. */
  relatives: CastPerson[];
  cities: string[];
}

const she = (name: string): CastPerson => ({ name, he: 'she' });
const he = (name: string): CastPerson => ({ name, he: 'he' });

export const CASTS: Record<string, Cast> = {
  'north-america': {
    label: 'friends in North America',
    people: [
      she('Maya'), he('Jordan'), she('Priya'), he('Marcus'), she('Olivia'), he('Ethan'), she('Chloe'), he('Tyler'),
      she('Hannah'), he('Derek'), she('Lauren'), he('Caleb'), she('Jasmine'), he('Owen'), she('Brianna'), he('Wesley'),
      she('Natalie'), he('Grant'), she('Sophie'), he('Dylan'),
    ],
    relatives: [she('Kayla'), he('Brandon'), she('Megan'), he('Travis'), she('Ashley'), he('Colton'), she('Brooke'), he('Garrett'), she('Kelsey'), he('Trevor'), she('Paige'), he('Hunter'), she('Whitney'), he('Logan'), she('Courtney'), he('Chase'), she('Danielle'), he('Shane'), she('Alexis'), he('Bryce')],
    cities: ['Denver', 'Portland', 'Austin', 'Seattle', 'Chicago', 'Boston', 'Atlanta', 'Toronto', 'Vancouver', 'Minneapolis', 'Phoenix', 'Nashville', 'Pittsburgh', 'Montreal', 'Sacramento', 'Baltimore'],
  },
  europe: {
    label: 'friends in Europe',
    people: [
      she('Elena'), he('Lukas'), she('Sofia'), he('Mateo'), she('Ingrid'), he('Tomas'), she('Chiara'), he('Henrik'),
      she('Amelie'), he('Pavel'), she('Lucia'), he('Johan'), she('Greta'), he('Nikolai'), she('Ines'), he('Bastian'),
      she('Marta'), he('Emil'), she('Clara'), he('Stefan'),
    ],
    relatives: [she('Annika'), he('Jonas'), she('Federica'), he('Matteo'), she('Zuzana'), he('Florian'), she('Margot'), he('Anders'), she('Teresa'), he('Dominik'), she('Elodie'), he('Rafael'), she('Katrin'), he('Vincent'), she('Noemi'), he('Kasper'), she('Irene'), he('Milos'), she('Helga'), he('Bruno')],
    cities: ['Lisbon', 'Vienna', 'Prague', 'Munich', 'Lyon', 'Copenhagen', 'Krakow', 'Rotterdam', 'Milan', 'Seville', 'Dublin', 'Edinburgh', 'Helsinki', 'Zurich', 'Budapest', 'Barcelona'],
  },
  global: {
    label: 'friends around the world',
    people: [
      she('Amara'), he('Kenji'), she('Zainab'), he('Ravi'), she('Thandiwe'), he('Minh'), she('Leila'), he('Kwame'),
      she('Ana'), he('Hiroshi'), she('Nadia'), he('Tariq'), she('Mei'), he('Obinna'), she('Yasmin'), he('Arjun'),
      she('Folake'), he('Joon'), she('Imani'), he('Diego'),
    ],
    relatives: [he('Chidi'), she('Ayesha'), he('Takumi'), she('Nomvula'), he('Farid'), she('Sunita'), he('Emeka'), she('Haruka'), he('Kofi'), she('Lina'), he('Sipho'), she('Dalia'), he('Hamza'), she('Noor'), he('Jin'), she('Adaeze'), he('Rohan'), she('Esi'), he('Karim'), she('Yuki')],
    cities: ['Nairobi', 'Lagos', 'Mumbai', 'Singapore', 'Seoul', 'Cairo', 'Manila', 'Johannesburg', 'Bangalore', 'Osaka', 'Accra', 'Dubai', 'Hanoi', 'Lima', 'Bogota', 'Istanbul'],
  },
};

export const PET_NAMES = [
  'Biscuit', 'Pickle', 'Mochi', 'Noodle', 'Ziggy', 'Pepper', 'Waffles', 'Juniper', 'Tofu', 'Bramble', 'Nacho', 'Olive',
  'Pretzel', 'Clementine', 'Gizmo', 'Dumpling', 'Pixel', 'Marmalade', 'Bagel', 'Sprocket', 'Tater', 'Zuzu', 'Figaro', 'Luna',
];
export const DOG_BREEDS = ['beagle', 'labrador', 'poodle', 'terrier', 'corgi', 'dachshund', 'greyhound', 'husky', 'spaniel', 'collie'];
export const CAT_BREEDS = ['tabby', 'siamese', 'persian', 'ragdoll', 'sphynx', 'bengal'];

export interface Job {
  title: string;
  /** A paraphrase of the job sharing no word with the title (for "what is X's profession" questions). */
  field: string;
}

export const JOBS: Job[] = [
  { title: 'nurse', field: 'healthcare' },
  { title: 'accountant', field: 'finance' },
  { title: 'software developer', field: 'programming' },
  { title: 'teacher', field: 'education' },
  { title: 'architect', field: 'building design' },
  { title: 'pharmacist', field: 'medicine' },
  { title: 'electrician', field: 'wiring' },
  { title: 'chef', field: 'cooking' },
  { title: 'graphic designer', field: 'illustration' },
  { title: 'paramedic', field: 'emergency medicine' },
  { title: 'librarian', field: 'books' },
  { title: 'journalist', field: 'newspapers' },
  { title: 'veterinarian', field: 'animal medicine' },
  { title: 'lawyer', field: 'legal work' },
  { title: 'translator', field: 'languages' },
  { title: 'data analyst', field: 'statistics' },
];

/** Made-up employers (rare tokens). */
export const COMPANIES = [
  'Qorvane', 'Brixtel', 'Tenzaro', 'Velmontix', 'Orlenza', 'Kestrova', 'Plumbrix', 'Zentara', 'Hexwick', 'Dunmorel',
  'Cobaltix', 'Fennimar', 'Vexlor', 'Marquendo', 'Oskaline', 'Trivella', 'Quillfax', 'Sarnova', 'Yeltric', 'Zorbind',
  'Graventis', 'Lumisk', 'Norquay', 'Pellucor', 'Wrenfold', 'Astravik', 'Bellquist', 'Corvanta', 'Drummlo', 'Elvantra',
];

/** Made-up project codenames (rare tokens). */
export const CODENAMES = [
  'Zephyrine', 'Quorlix', 'Bramblecore', 'Vantorr', 'Skelmora', 'Oxbrine', 'Thistlevane', 'Krovia', 'Mirelight', 'Pendrax',
  'Solvanto', 'Wyvernet', 'Glimmerhaus', 'Tarnwick', 'Ulvaris', 'Cindermoor',
];

/** Made-up universities (rare tokens). */
export const UNIVERSITIES = ['Hollisford', 'Ravensmere', 'Castleburn', 'Quarrendon', 'Wexmoor', 'Greyhallow', 'Tamberlin', 'Saltmarsh', 'Dovecourt', 'Ellenbrook'];

export const PROGRAMS = ['nursing', 'architecture', 'law', 'marine biology', 'film', 'veterinary', 'journalism', 'engineering', 'psychology', 'music'];

export const CAR_MAKES = ['Honda', 'Toyota', 'Subaru', 'Volvo', 'Mazda', 'Kia', 'Fiat', 'Nissan', 'Hyundai', 'Ford', 'Peugeot', 'Skoda'];
export const COLORS = ['red', 'blue', 'silver', 'black', 'white', 'green', 'grey', 'yellow'];

/** Trips: an unusual destination (rare-ish token) with a dish and a sight. */
export interface Place {
  place: string;
  food: string;
  sight: string;
  /** The rare token of a two-word place. */
  rare?: string;
}

export const PLACES: Place[] = [
  { place: 'Ljubljana', food: 'strudel', sight: 'castle' },
  { place: 'Oaxaca', food: 'mole', sight: 'market' },
  { place: 'Hokkaido', food: 'ramen', sight: 'snow festival' },
  { place: 'Cappadocia', food: 'pottery kebab', sight: 'balloon ride' },
  { place: 'Zanzibar', food: 'octopus curry', sight: 'spice farm' },
  { place: 'Tbilisi', food: 'khachapuri', sight: 'sulfur baths' },
  { place: 'Valparaiso', food: 'empanadas', sight: 'street murals' },
  { place: 'Chefchaouen', food: 'tagine', sight: 'blue streets' },
  { place: 'Hallstatt', food: 'trout', sight: 'lake' },
  { place: 'Kotor', food: 'mussels', sight: 'old town walls' },
  { place: 'Sintra', food: 'custard tarts', sight: 'palace' },
  { place: 'Plovdiv', food: 'banitsa', sight: 'roman theatre' },
  { place: 'Matera', food: 'focaccia', sight: 'cave houses' },
  { place: 'Gjirokaster', food: 'byrek', sight: 'stone houses' },
  { place: 'Luang Prabang', food: 'sticky rice', sight: 'waterfalls', rare: 'Prabang' },
  { place: 'Gyeongju', food: 'bibimbap', sight: 'royal tombs' },
  { place: 'Cusco', food: 'ceviche', sight: 'ruins' },
  { place: 'Tromso', food: 'reindeer stew', sight: 'northern lights' },
  { place: 'Lofoten', food: 'dried cod', sight: 'fishing villages' },
  { place: 'Essaouira', food: 'grilled sardines', sight: 'harbour' },
  { place: 'Bruges', food: 'waffles', sight: 'canals' },
  { place: 'Dubrovnik', food: 'black risotto', sight: 'city walls' },
  { place: 'Yogyakarta', food: 'gudeg', sight: 'temples' },
  { place: 'Arequipa', food: 'rocoto relleno', sight: 'monastery' },
];

export interface ProductCategory {
  category: string;
  verdict: string[];
}

/** Made-up brands; product codes are generated (letters + digits, so no word vector either). */
export const BRANDS = ['Sennvox', 'Kelto', 'Brevik', 'Norrland', 'Lumio', 'Strydon', 'Vacuna', 'Auralis', 'Pivotta', 'Quenby', 'Zaltec', 'Marrowby'];
export const PRODUCTS: ProductCategory[] = [
  { category: 'headphones', verdict: ['has amazing noise cancelling but the ear cups get sweaty', 'sounds incredible, the bass is honestly too much sometimes'] },
  { category: 'e-bike', verdict: ['makes my commute twenty minutes faster, zero regrets', 'is great until the battery dies halfway up a hill'] },
  { category: 'espresso machine', verdict: ['makes better coffee than the cafe downstairs, but it is so loud', 'leaks water all over the counter every morning'] },
  { category: 'tent', verdict: ['leaked on the very first rainy night, so it is going back', 'survived a storm on the ridge without a drop inside'] },
  { category: 'camera', verdict: ['takes gorgeous photos but the battery is dead by lunch', 'autofocus is painfully slow in low light'] },
  { category: 'phone', verdict: ['screen cracked after one week, not impressed', 'battery lasts two full days, I am in love'] },
  { category: 'running shoes', verdict: ['gave me blisters on the very first run', 'feel like running on clouds, my knees are thanking me'] },
  { category: 'robot vacuum', verdict: ['keeps getting stuck under the couch', 'terrifies the cat but the floors have never been cleaner'] },
  { category: 'smartwatch', verdict: ['tracks my sleep weirdly well, it knows I stay up too late', 'strap broke after a month, cheap plastic'] },
];

export const WEEKDAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
export const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/** Filler slots. */
export const FOODS = ['tacos', 'pizza', 'ramen', 'curry', 'pasta', 'burritos', 'dumplings', 'stir fry', 'soup', 'leftovers', 'a burger', 'salad'];
export const CUISINES = ['Thai', 'Ethiopian', 'Korean', 'Lebanese', 'Peruvian', 'Greek', 'Vietnamese', 'Georgian'];
export const GENRES = ['crime', 'cooking', 'sci-fi', 'dating', 'documentary', 'period drama', 'sitcom', 'fantasy'];
export const CHORES = ['laundry', 'sleeping in', 'groceries', 'cleaning the fridge', 'catching up on emails', 'reorganising the closet', 'fixing the bike', 'doing nothing at all'];
